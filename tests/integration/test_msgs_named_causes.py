"""Issue 22 item 10: each message names the real cause, in one line.

`--cron '61 * * * *'` names the out-of-range field (it has five); an engine that exits at start is
reported as exited, not `process alive`; broken web-config YAML is one line; a suite engine whose
target cannot be inferred says `add target:`; a failed baseline pass says why its series failed.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from exporter.cli import main as exporter_main
from loadgen.baseline.passrun import run_pass
from loadgen.baseline.suite import load_suite
from loadgen.cli.main import cli
from loadgen.experiments.launch import EngineFailed, LaunchedEngine
from loadgen.experiments.plantypes import EngineSpec
from loadgen.run.runner import run_benchmark_sync
from tests.baseline_support import sim_command, write_suite

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize(
    ("cron", "named"),
    [
        ("61 * * * *", "field 1 (minute) '61' is out of range or unreadable (valid: 0-59)"),
        ("0 24 * * *", "field 2 (hour) '24'"),
        ("0 2 32 * *", "field 3 (day of month) '32'"),
        ("0 2 * 13 *", "field 4 (month) '13'"),
        ("0 2 * * 9", "field 5 (day of week) '9'"),
        ("0 2 * *", "4 fields; use five cron fields"),
    ],
)
def test_msgs_cron_names_the_out_of_range_field(tmp_path: Path, cron: str, named: str) -> None:
    suite = write_suite(tmp_path / "b.yaml", tmp_path / "results", stepped=sim_command())
    result = CliRunner().invoke(cli, ["baseline", "schedule", str(suite), "--cron", cron, "--store", "none"])
    assert result.exit_code == 2, result.output
    assert f"invalid --cron {cron!r}: {named}" in result.output
    if len(cron.split()) == 5:
        assert "use five cron fields" not in result.output


def test_msgs_engine_that_exits_at_start_is_reported_as_exited(tmp_path: Path) -> None:
    command = (sys.executable, "-c", "import sys; print('bad flag --api-key sk-secret1'); sys.exit(2)")
    spec = EngineSpec("e", "launch", "openai", None, command, health_timeout_s=30)
    engine = LaunchedEngine(spec, {}, tmp_path / "engine.log")
    with pytest.raises(EngineFailed) as failed:
        engine.start()
    message = str(failed.value)
    assert "engine 'e' exited with code 2 at start (its port never listened)" in message
    assert "process alive" not in message
    assert "bad flag --api-key <redacted>" in message  # the log's last line, secrets hidden
    assert "sk-secret1" not in message


def test_msgs_broken_web_config_yaml_is_one_line(tmp_path: Path) -> None:
    web = tmp_path / "web.yml"
    web.write_text("basic_auth_users:\n  admin: [$2b$12$hash\n  other: x\n")
    result = CliRunner().invoke(exporter_main, ["--web-config-file", str(web), "--port", "0"])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"Error: --web-config-file: web config {web}:3:8: invalid YAML (")
    assert "$2b$12$hash" not in result.output  # the file's text is not echoed


def test_msgs_suite_engine_without_a_target_says_add_target(tmp_path: Path) -> None:
    suite = tmp_path / "b.yaml"
    engines = {"e": {"kind": "external", "base_url": "http://127.0.0.1:1"}}
    series = [{"name": "a", "engine": "e", "workload": "short", "rate": 4}]
    suite.write_text(yaml.safe_dump({"name": "s", "engines": engines, "series": series}))
    result = CliRunner().invoke(cli, ["baseline", "validate", str(suite)])
    assert result.exit_code == 2
    assert "engine 'e': add target: (one of vllm, sglang, " in result.output
    assert "invalid target None" not in result.output


def test_msgs_failed_baseline_pass_gives_the_series_reason(tmp_path: Path) -> None:
    failing = sim_command() + " --fault-error-rate 1"
    suite = load_suite(write_suite(tmp_path / "b.yaml", tmp_path / "results", stepped=failing))
    result = run_pass(suite, None, run_fn=run_benchmark_sync, log=lambda _m: None)
    assert result.outcome == "failed"
    (line,) = result.failures()
    run_id = result.series["stepped"]["run_id"]
    assert line.startswith(f"stepped: partial (run {run_id}): "), line
    assert "error rate" in line, line  # the run's own partial reason, not `stepped: done`
