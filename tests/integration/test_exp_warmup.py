"""Issue 11 item 22: a warm-up smaller than the concurrency is warned about (plan validation, the
run console), and `warmup_after_launch` gives each run after a launch or flush its own warm-up."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from loadgen.cli.experiment import experiment
from loadgen.cli.main import cli
from loadgen.experiments.plan import parse_plan
from loadgen.experiments.runner import ExperimentRunner
from loadgen.experiments.state import ExperimentState, experiment_dir
from loadgen.results.rundir import load_run
from loadgen.run.runner import run_benchmark_sync

pytestmark = pytest.mark.timeout(90)
SIM = "python -m simengine --personality vllm --port {port} --time-scale 20"


def _plan_text(tmp_path: Path, warmup: int, engine_extra: str = "") -> str:
    return (
        f"name: t\nresults_dir: {tmp_path}\n"
        f"defaults: {{num_prompts: 6, seed: 7, metrics_port: 0, profile: short, warmup: {warmup}}}\n"
        f"engines:\n  sim:\n    kind: launch\n    command: {SIM}\n{engine_extra}"
        "phases:\n  - {name: p, kind: baseline, workloads: [short], concurrency: [4]}\n"
    )


@pytest.mark.parametrize(("warmup", "warned"), [(2, True), (4, False)])
def test_validate_warns_when_warmup_is_below_the_concurrency(
    tmp_path: Path, warmup: int, warned: bool
) -> None:
    path = tmp_path / "plan.yaml"
    path.write_text(_plan_text(tmp_path, warmup))
    result = CliRunner().invoke(experiment, ["validate", str(path)])
    assert result.exit_code == 0, result.output
    expected = "warmup 2 is smaller than the concurrency 4: 2 requests of the start burst are measured"
    assert (expected in result.output) is warned
    assert (f"warning: {path}:" in result.output) is warned  # points at the plan line


def test_run_console_warns_about_the_start_burst(tmp_path: Path) -> None:
    args = [
        "--target",
        "sim",
        "--max-concurrency",
        "8",
        "--rate",
        "inf",
        "--warmup",
        "3",
        "--num-prompts",
        "8",
    ]
    result = CliRunner().invoke(cli, [*args, "--metrics-port", "0", "--results-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "warning: warmup 3 is smaller than the concurrency 8: 5 requests" in result.output


def test_warmup_after_launch_warms_each_fresh_engine(tmp_path: Path) -> None:
    plan = parse_plan(_plan_text(tmp_path, 0, "    warmup_after_launch: 4\n"), "plan.yaml")
    state = ExperimentState("exp-test", experiment_dir(tmp_path, "exp-test"), plan.name)
    log: list[str] = []
    fn = lambda config: run_benchmark_sync(config, progress=False)  # noqa: E731
    ExperimentRunner(plan, state, run_fn=fn, log=log.append).run()
    (run_id,) = state.run_ids()
    record = load_run(tmp_path, run_id)
    assert record.manifest["workload"]["warmup"] == 4
    assert record.summary["requests"]["measured"] == 6  # the warm-up requests are not measured
    assert not [line for line in log if "smaller than the concurrency" in line]
