"""`loadgen run` as a user runs it: usage errors, JSON output, config sources, Ctrl-C / SIGTERM."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from loadgen.cli.main import cli
from loadgen.config import target_names
from tests.loadgen_servers import FakeEngine, ServerThread, free_port

pytestmark = pytest.mark.timeout(60)
REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--target", "tgi"], "'tgi' is not one of " + ", ".join(f"'{name}'" for name in target_names())),
        (["--input-len", "zipf:3"], "bad length 'zipf:3': unknown kind 'zipf'; choose from fixed, uniform"),
        (["--rate", "fast"], "invalid rate 'fast'"),
        (["--slo", "ttft=soon"], "invalid slo ttft 'soon'"),
        (["--target", "openai"], "target 'openai' needs --base-url"),
        (["--frobnicate"], "no such option '--frobnicate'"),
        (["--max-concurrency", "0"], "invalid max_concurrency 0"),
        (["--http-client", "curl"], "'curl' is not one of 'aiohttp', 'raw'"),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(args: list[str], message: str, tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, [*args, "--results-dir", str(tmp_path)])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, result.output
    assert message in lines[0]
    assert not any(tmp_path.iterdir())


def test_unreachable_target_is_one_line_with_a_hint(tmp_path: Path) -> None:
    port = free_port()
    result = CliRunner().invoke(
        cli,
        [
            "--target",
            "vllm",
            "--base-url",
            f"http://127.0.0.1:{port}",
            "--results-dir",
            str(tmp_path),
            "--metrics-port",
            "0",
        ],
    )
    assert result.exit_code == 2
    assert result.output.strip() == (
        f"Error: cannot reach http://127.0.0.1:{port} (connection refused): is vLLM running? try --target sim"
    )


@pytest.mark.parametrize("http_client", ["aiohttp", "raw"])
def test_json_summary_config_file_env_and_flags(tmp_path: Path, http_client: str) -> None:
    config_file = tmp_path / "run.yaml"
    config_file.write_text("num_prompts: 6\nrate: 50\nseed: 1\nscenario: from-yaml\noutput_len: fixed:4\n")
    engine = FakeEngine(ttft_s=0.002, itl_s=0.001)
    with ServerThread(engine.app) as server:
        result = CliRunner().invoke(
            cli,
            [
                "--config",
                str(config_file),
                "--target",
                "openai",
                "--base-url",
                server.base_url,
                "--seed",
                "3",
                "--json",
                "--quiet",
                "--results-dir",
                str(tmp_path / "r"),
                "--metrics-port",
                "0",
                "--linger",
                "0",
                "--http-client",
                http_client,
            ],
            env={"LOADGEN_SCENARIO": "from-env", "LOADGEN_SEED": "2", "OPENAI_API_KEY": "sk-never-stored"},
        )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["requests"]["ok"] == 6
    assert summary["scenario"] == "from-env"  # env beats YAML
    assert "results: " in result.stderr
    manifest_text = next((tmp_path / "r").glob("*/manifest.json")).read_text()
    assert json.loads(manifest_text)["config"]["seed"] == 3  # flag beats env
    assert json.loads(manifest_text)["config"]["http_client"] == http_client
    assert engine.streams[0].headers["Authorization"] == "Bearer sk-never-stored"
    sent = {k.lower(): v for k, v in engine.streams[0].headers.items()}
    assert sent["x-request-id"].endswith("-000000")
    assert sent["accept-encoding"] == "identity"  # stamped bodies must come uncompressed
    assert json.loads(manifest_text)["client"]["event_loop"].startswith("uvloop ")  # the CLI's loop
    for path in (tmp_path / "r").rglob("*"):  # the results store (a binary SQLite file) included
        if path.is_file():
            assert b"sk-never-stored" not in path.read_bytes()


@pytest.mark.parametrize(
    ("sig", "http_client"), [(signal.SIGINT, "aiohttp"), (signal.SIGTERM, "aiohttp"), (signal.SIGINT, "raw")]
)
def test_interrupt_cancels_in_flight_and_writes_a_partial_result(
    sig: signal.Signals, http_client: str, tmp_path: Path
) -> None:
    engine = FakeEngine(ttft_s=0.01, itl_s=0.05)  # 200 tokens: each request would take 10 s
    with ServerThread(engine.app) as server:
        cmd = [
            sys.executable,
            "-m",
            "loadgen.cli.main",
            "--target",
            "openai",
            "--base-url",
            server.base_url,
            "--num-prompts",
            "40",
            "--max-concurrency",
            "4",
            "--output-len",
            "fixed:200",
            "--metrics-port",
            "0",
            "--linger",
            "0",
            "--results-dir",
            str(tmp_path),
            "--http-client",
            http_client,
        ]
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 30
        while len(engine.streams) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)  # let the first tokens arrive
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 1, err
    assert f"PARTIAL RESULT: interrupted by {sig.name}" in out
    run_dir = next(p for p in tmp_path.iterdir() if p.is_dir())
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["partial"] is True
    assert summary["requests"]["by_outcome"]["cancelled"] == 4
    lines = (run_dir / "requests.jsonl").read_text().splitlines()
    assert len(lines) == len(engine.streams) == 4  # every request sent is recorded
    assert all(json.loads(line)["first_token_s"] is not None for line in lines)
    assert (tmp_path / "runs.csv").read_text().count("\n") == 2
