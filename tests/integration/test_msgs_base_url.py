"""Issue 22 items 8 and 9: a bad `--base-url` or experiment id is one line naming the value (exit 2),
and a base URL ending in `/v1` is used without it (one info line), against the real simulated engine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from loadgen.cli.main import cli
from simengine.embedded import EmbeddedEngine

pytestmark = pytest.mark.timeout(90)


def _invoke(args: list[str]) -> tuple[int, list[str]]:
    result = CliRunner().invoke(cli, args)
    return result.exit_code, [line for line in result.output.splitlines() if line.strip()]


def _run(base_url: str, results: Path, *extra: str) -> tuple[int, list[str]]:
    return _invoke(
        [
            "run",
            "--target",
            "vllm",
            "--base-url",
            base_url,
            "--num-prompts",
            "3",
            "--profile",
            "short",
            "--metrics-port",
            "0",
            "--store",
            "none",
            "--quiet",
            "--results-dir",
            str(results),
            *extra,
        ]
    )


def test_msgs_base_url_with_credentials_is_one_line_without_the_password(tmp_path: Path) -> None:
    code, lines = _run("http://u:hunter2@127.0.0.1:9", tmp_path, "--api-key", "k")
    assert code == 2
    assert len(lines) == 1, lines
    assert "invalid base_url 'http://<redacted>@127.0.0.1:9'" in lines[0]
    assert "--api-key (or OPENAI_API_KEY) is set too; give one of them" in lines[0]
    assert "hunter2" not in lines[0]
    assert not any(tmp_path.iterdir())  # nothing half-written


def test_msgs_base_url_unclosed_ipv6_bracket_is_one_line(tmp_path: Path) -> None:
    code, lines = _run("http://[::1", tmp_path)
    assert code == 2
    assert lines == ["Error: invalid base_url 'http://[::1': Invalid IPv6 URL"]


@pytest.mark.parametrize("given", ["plan.yaml", "examples/sim-phased.yaml"])
def test_msgs_experiment_status_of_a_plan_file_is_one_line(tmp_path: Path, given: str) -> None:
    plan = tmp_path / "sim-phased.yaml"
    plan.write_text("name: x\n")
    arg = str(plan) if "/" in given else given
    code, lines = _invoke(["experiment", "status", arg, "--results-dir", str(tmp_path)])
    assert code == 2
    assert lines[-1] == (
        f"Error: {arg!r} is not an experiment id (a plan file?): give the id that "
        "`loadgen experiment run` printed (exp-...)"
    )
    assert not any("Traceback" in line for line in lines)


def test_msgs_experiment_status_with_a_torn_state_file_is_one_line(tmp_path: Path) -> None:
    state = tmp_path / "experiments" / "exp-x" / "state.json"
    state.parent.mkdir(parents=True)
    state.write_text("{cut")
    code, lines = _invoke(["experiment", "status", "exp-x", "--results-dir", str(tmp_path)])
    assert code == 2
    assert "experiment 'exp-x': cannot read" in lines[-1]
    assert "JSONDecodeError" in lines[-1]


@pytest.mark.parametrize("suffix", ["/v1", "/v1/"])
def test_msgs_base_url_v1_suffix_is_stripped_and_said(tmp_path: Path, suffix: str) -> None:
    with EmbeddedEngine(["--personality", "vllm"]) as engine:
        code, lines = _run(engine.base_url + suffix, tmp_path, "--model", engine.config.model)
    assert code == 0, lines
    note = f"info: base URL {engine.base_url + suffix!r} ends in /v1; using {engine.base_url!r}"
    assert any(line.startswith(note) for line in lines), lines
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    summary = json.loads((run_dir / "summary.json").read_text())
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["config"]["base_url"] == engine.base_url
    assert summary["requests"]["ok"] == 3  # before: every request went to /v1/v1/completions and failed
