"""Entrypoints: EmbeddedEngine (in-process), `python -m simengine`, `loadgen sim`."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from click.testing import CliRunner

from loadgen.cli.main import cli as loadgen_cli
from loadgen.cli.sim import sim
from simengine.embedded import EmbeddedEngine


def _get(url: str) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return resp.status, resp.read()


def _post(url: str, body: dict[str, object]) -> bytes:
    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        return bytes(resp.read())


def test_embedded_engine_serves_on_a_free_loopback_port_and_stops() -> None:
    with EmbeddedEngine(["--max-num-seqs", "8", "--time-scale", "20"]) as eng:
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+", eng.base_url)
        assert eng.config.max_num_seqs == 8
        body = json.loads(
            _post(eng.base_url + "/v1/completions", {"prompt": "hi", "max_tokens": 3, "ignore_eos": True})
        )
        assert body["usage"]["completion_tokens"] == 3
        url = eng.base_url
    try:
        _get(url + "/health")
        raise AssertionError("server still answering after stop()")
    except OSError:
        pass


def test_two_embedded_engines_run_side_by_side() -> None:
    with EmbeddedEngine(["--personality", "sglang"]) as a, EmbeddedEngine([]) as b:
        assert a.base_url != b.base_url
        assert _get(a.base_url + "/get_model_info")[0] == 200
        assert _get(b.base_url + "/version")[0] == 200


def test_python_m_simengine_serves_and_exits_cleanly_on_sigterm() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "simengine", "--port", "0", "--personality", "sglang", "--enforce-eager"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = re.search(r"listening on (http://127\.0\.0\.1:\d+)", line)
        assert match, line
        status, body = _get(match.group(1) + "/get_server_info")
        assert status == 200
        assert json.loads(body)["unrecognized_args"] == {"enforce-eager": True}
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _status(url: str) -> int:
    try:
        return _get(url)[0]
    except urllib.error.HTTPError as exc:
        return exc.code


def test_embedded_engine_is_in_dev_mode_unless_told_not() -> None:
    with EmbeddedEngine([]) as dev, EmbeddedEngine(["--no-dev-mode"]) as plain:
        assert dev.config.dev_mode is True
        assert _status(dev.base_url + "/server_info") == 200  # loadgen reads its launch flags here
        assert plain.config.dev_mode is False
        assert _status(plain.base_url + "/server_info") == 404


@pytest.mark.parametrize(("sim_flags", "dev_mode"), [((), True), (("--sim-no-dev-mode",), False)])
def test_loadgen_target_sim_reads_server_info_only_in_dev_mode(
    tmp_path: Path, sim_flags: tuple[str, ...], dev_mode: bool
) -> None:
    args = ["run", "--target", "sim", "--num-prompts", "2", "--profile", "short", "--metrics-port", "0"]
    args += ["--linger", "0", "--quiet", "--json", "--results-dir", str(tmp_path), "--sim-time-scale", "20"]
    result = CliRunner().invoke(loadgen_cli, [*args, "--sim-max-num-seqs", "8", *sim_flags])
    assert result.exit_code == 0, result.output
    run_id = json.loads(result.stdout)["run_id"]
    engine = json.loads((tmp_path / run_id / "manifest.json").read_text())["engine"]
    assert ("/server_info" in engine["sources"]) is dev_mode
    assert (engine["server_args"].get("server_args", {}).get("max_num_seqs") == 8) is dev_mode


@pytest.mark.parametrize(("env_value", "status"), [("1", 200), ("0", 404), (None, 404)])
def test_python_m_simengine_reads_vllm_server_dev_mode_from_its_environment(
    env_value: str | None, status: int
) -> None:
    env = {k: v for k, v in os.environ.items() if k != "VLLM_SERVER_DEV_MODE"}
    if env_value is not None:
        env["VLLM_SERVER_DEV_MODE"] = env_value
    proc = subprocess.Popen(
        [sys.executable, "-m", "simengine", "--port", "0"], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert proc.stdout is not None
        match = re.search(r"listening on (http://127\.0\.0\.1:\d+)", proc.stdout.readline())
        assert match
        assert _status(match.group(1) + "/server_info") == status
    finally:
        proc.terminate()
        proc.wait(timeout=15)


def test_bad_flag_exits_2_with_one_line_error() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "simengine", "--interconnect", "infiniband"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0
    assert "infiniband" in proc.stderr


def test_loadgen_sim_passes_engine_flags_through() -> None:
    result = CliRunner().invoke(sim, ["--max-running-requests", "4", "--gpu", "tpu"])
    assert result.exit_code == 2
    assert "'tpu'" in result.output


def test_stop_ends_in_flight_streams_promptly() -> None:
    import threading
    import time

    eng = EmbeddedEngine(["--time-scale", "1"]).start()
    outcome: list[str] = []

    def client() -> None:
        req = urllib.request.Request(
            eng.base_url + "/v1/completions",
            data=json.dumps({"prompt": "x", "max_tokens": 5000, "ignore_eos": True, "stream": True}).encode(),
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                body = resp.read()
            outcome.append("complete" if b"[DONE]" in body else "truncated")
        except Exception as exc:  # the connection is cut: what a client of a dying server sees
            outcome.append(type(exc).__name__)

    t = threading.Thread(target=client)
    t.start()
    time.sleep(0.5)
    started = time.monotonic()
    eng.stop()
    t.join(timeout=10)
    assert time.monotonic() - started < 5
    assert outcome
    assert outcome[0] != "complete"


def test_loadgen_sim_subcommand_is_registered() -> None:
    from loadgen.cli.main import cli

    result = CliRunner().invoke(cli, ["sim", "--personality", "trt"])
    assert result.exit_code == 2
    assert "'trt'; choose from vllm, sglang" in result.output
