"""Issue 11 item 21: a launched engine that dies mid-plan is noticed before the next run and
relaunched (once) or has the rest of its runs marked failed; partial runs show as partial."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from click.testing import CliRunner

from loadgen.cli.experiment import experiment
from loadgen.config import RunConfig
from loadgen.experiments.expand import expand
from loadgen.experiments.plan import parse_plan
from loadgen.experiments.runner import ExperimentRunner
from loadgen.experiments.state import ExperimentState, experiment_dir
from loadgen.records import RunResult
from loadgen.results.rundir import load_run
from loadgen.run.runner import run_benchmark_sync

pytestmark = pytest.mark.timeout(120)
SIM = "python -m simengine --personality vllm --port {port} --time-scale 20"


def _plan_text(tmp_path: Path, policy: str, loads: str = "[1, 2, 3]") -> str:
    return (
        f"name: t\nresults_dir: {tmp_path}\non_engine_failure: {policy}\n"
        "defaults: {num_prompts: 4, seed: 7, metrics_port: 0, profile: short}\n"
        f"engines:\n  sim:\n    kind: launch\n    command: {SIM}\n    restart_between_runs: false\n"
        f"phases:\n  - {{name: p, kind: baseline, workloads: [short], concurrency: {loads}}}\n"
    )


def _run_killing(tmp_path: Path, policy: str, kill_after: set[int]) -> tuple[ExperimentState, list[str]]:
    """Run the plan, SIGKILLing the launched engine after the runs numbered in `kill_after`."""
    plan = parse_plan(_plan_text(tmp_path, policy), "plan.yaml")
    state = ExperimentState("exp-test", experiment_dir(tmp_path, "exp-test"), plan.name)
    log: list[str] = []
    runner = ExperimentRunner(plan, state, log=log.append)
    done: list[int] = []

    def run_then_kill(config: RunConfig) -> RunResult:
        result = run_benchmark_sync(config, progress=False)
        done.append(1)
        if len(done) in kill_after:
            assert runner.active is not None
            assert runner.active.engine is not None
            assert runner.active.engine.proc is not None
            os.kill(runner.active.engine.proc.pid, signal.SIGKILL)  # the engine dies between runs
            runner.active.engine.proc.wait()
        return result

    runner.run_fn = run_then_kill
    return runner.run(), log


def test_a_dead_engine_is_relaunched_once(tmp_path: Path) -> None:
    state, log = _run_killing(tmp_path, "relaunch", kill_after={1})
    assert [e["status"] for e in state.runs.values()] == ["done", "done", "done"]
    second = load_run(tmp_path, state.run_ids()[1]).manifest
    assert second["cache"]["method"] == "restart"  # relaunched: a fresh engine, not a flush
    assert any(
        "exited with code -9 since its last run" in line and "relaunching it" in line for line in log
    ), log
    assert (state.directory / "engine-sim.log").read_text().count("\n# ") == 2


def test_a_second_death_after_the_relaunch_fails_the_rest(tmp_path: Path) -> None:
    state, _ = _run_killing(tmp_path, "relaunch", kill_after={1, 2})
    statuses = [e["status"] for e in state.runs.values()]
    assert statuses == ["done", "done", "failed"]
    assert "exited with code -9" in list(state.runs.values())[2]["error"]


def test_on_engine_failure_fail_marks_the_rest_of_its_runs_failed(tmp_path: Path) -> None:
    state, _ = _run_killing(tmp_path, "fail", kill_after={1})
    entries = list(state.runs.values())
    assert [e["status"] for e in entries] == ["done", "failed", "failed"]
    assert "exited with code -9 since its last run" in entries[1]["error"]
    assert entries[2]["error"].startswith("not run: engine 'sim' exited")


def test_a_partial_run_shows_as_partial_in_status(tmp_path: Path) -> None:
    text = _plan_text(tmp_path, "fail", loads="[1]")
    plan = parse_plan(text, "plan.yaml")
    state = ExperimentState("exp-test", experiment_dir(tmp_path, "exp-test"), plan.name)
    (key,) = [spec.key for spec in expand(plan)]
    state.record(key, status="done", run_id="r1", partial=True)
    (state.directory / "plan.yaml").write_text(text)
    status = CliRunner().invoke(experiment, ["status", "exp-test", "--results-dir", str(tmp_path)])
    assert status.exit_code == 0, status.output
    (row,) = [line for line in status.stdout.splitlines() if " r1 " in f"{line} "]
    assert " partial " in row
    assert " done " not in row
