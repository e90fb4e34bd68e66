"""The plan runner end to end: launched simulated engines restarted between runs, external ones
flushed, engines that never become healthy, and interrupted experiments that resume."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from loadgen.cli.experiment import experiment
from loadgen.config import RunConfig
from loadgen.experiments.plan import parse_plan
from loadgen.experiments.runner import ExperimentInterrupted, ExperimentRunner, ExperimentStopped
from loadgen.experiments.state import ExperimentState, experiment_dir, load_state
from loadgen.records import RunResult
from loadgen.results.rundir import load_run
from loadgen.run.runner import run_benchmark_sync
from simengine.embedded import EmbeddedEngine

SIM = "python -m simengine --personality {personality} --port {{port}} --time-scale 20"
DEFAULTS = "defaults: {num_prompts: 8, seed: 7, metrics_port: 0, profile: short}\n"


def _plan(tmp_path: Path, engines: str, phases: str = "", extra: str = ""):
    phases = phases or "phases:\n  - {name: p, kind: baseline, workloads: [short], concurrency: [2, 4]}\n"
    text = f"name: t\nresults_dir: {tmp_path}\n{extra}{DEFAULTS}engines:\n{engines}{phases}"
    return parse_plan(text, "plan.yaml")


def _run(plan, tmp_path: Path, experiment_id: str = "exp-test", run_fn=None) -> ExperimentState:
    state = ExperimentState(experiment_id, experiment_dir(tmp_path, experiment_id), plan.name)
    fn = run_fn or (lambda config: run_benchmark_sync(config, progress=False))
    return ExperimentRunner(plan, state, run_fn=fn, log=lambda _: None).run()


def _manifests(tmp_path: Path, state: ExperimentState) -> list[dict]:
    return [load_run(tmp_path, run_id).manifest for run_id in state.run_ids()]


@pytest.fixture
def sglang_engine() -> Iterator[EmbeddedEngine]:
    with EmbeddedEngine(["--personality", "sglang", "--time-scale", "20"]) as engine:
        yield engine


def test_launched_engine_is_restarted_before_every_run(tmp_path):
    engines = (
        f"  sim:\n    kind: launch\n    command: {SIM.format(personality='vllm')}\n"
        "    params: {max_num_seqs: 4}\n    health_timeout_s: 30\n"
    )
    state = _run(_plan(tmp_path, engines), tmp_path)
    assert state.status == "done"
    manifests = _manifests(tmp_path, state)
    assert len(manifests) == 2
    for manifest in manifests:
        assert manifest["cache"]["flushed"] is True
        assert manifest["cache"]["method"] == "restart"
        assert manifest["engine"]["params"]["max_num_seqs"] == 4
        # read from the command the plan launched (vLLM tells nothing over HTTP outside dev mode)
        assert manifest["engine"]["param_sources"]["max_num_seqs"] == "experiment launch command"
        command = manifest["engine"]["launch_command"]
        assert command[command.index("--max-num-seqs") + 1] == "4"
        assert manifest["experiment"]["id"] == "exp-test"
        assert manifest["experiment"]["phase"] == "p"
    log = (state.directory / "engine-sim.log").read_text()
    assert log.count("# ") == 2  # one launch line per run: restarted


@pytest.mark.parametrize("dev_mode", [True, False])
def test_kept_engine_is_flushed_between_runs(tmp_path, dev_mode):
    env = "    env: {VLLM_SERVER_DEV_MODE: '1'}\n" if dev_mode else ""  # as real vLLM needs for the flush
    engines = (
        f"  sim:\n    kind: launch\n    command: {SIM.format(personality='vllm')}\n"
        f"    restart_between_runs: false\n{env}"
    )
    state = _run(_plan(tmp_path, engines), tmp_path)
    first, second = _manifests(tmp_path, state)
    assert first["cache"]["method"] == "restart"
    assert {k: second["cache"][k] for k in ("flushed", "method", "detail")} == {
        "flushed": dev_mode,
        "method": "POST /reset_prefix_cache",
        "detail": second["cache"]["detail"],
    }
    assert ("VLLM_SERVER_DEV_MODE=1" in second["cache"]["detail"]) is not dev_mode  # 404 names the fix
    assert (state.directory / "engine-sim.log").read_text().count("# ") == 1


def test_external_engines_are_flushed_or_marked(tmp_path, sglang_engine):
    url = sglang_engine.base_url
    engines = (
        f"  sgl:\n    kind: external\n    target: sglang\n    base_url: {url}\n"
        f"  generic:\n    kind: external\n    target: openai\n    base_url: {url}\n"
    )
    phases = "phases:\n  - {name: p, kind: baseline, workloads: [short], concurrency: [2]}\n"
    state = _run(_plan(tmp_path, engines, phases), tmp_path)
    sgl, generic = _manifests(tmp_path, state)
    assert sgl["cache"]["flushed"] is True
    assert sgl["cache"]["method"] == "POST /flush_cache"
    assert generic["cache"]["flushed"] is False
    assert "no prefix-cache flush" in generic["cache"]["detail"]
    (state.directory / "plan.yaml").write_text(_plan_text_for_status(tmp_path, engines, phases))
    status = CliRunner().invoke(experiment, ["status", "exp-test", "--results-dir", str(tmp_path)])
    assert status.exit_code == 0, status.output
    assert "NO (none)" in status.stdout
    assert "yes (POST /flush_cache)" in status.stdout


def _plan_text_for_status(tmp_path: Path, engines: str, phases: str) -> str:
    return f"name: t\nresults_dir: {tmp_path}\n{DEFAULTS}engines:\n{engines}{phases}"


PY = json.dumps(sys.executable)  # not every machine has a `python` on PATH
NEVER_HEALTHY = (
    "  broken:\n    kind: launch\n    target: vllm\n    command: [" + PY + ', -c, "import time; '
    'time.sleep(30)"]\n    health_timeout_s: 1\n'
)
EXITS = (
    "  crashing:\n    kind: launch\n    target: vllm\n    command: [" + PY + ', -c, "raise SystemExit(3)"]\n'
)
MISSING = "  missing:\n    kind: launch\n    target: vllm\n    command: no-such-engine-binary --port {port}\n"


def test_engine_that_never_becomes_healthy_fails_its_runs_and_the_plan_continues(tmp_path, sglang_engine):
    good = f"  sgl:\n    kind: external\n    target: sglang\n    base_url: {sglang_engine.base_url}\n"
    state = _run(_plan(tmp_path, NEVER_HEALTHY + EXITS + MISSING + good), tmp_path)
    runs = state.runs
    broken = [v for k, v in runs.items() if "/broken/" in k]
    assert broken[0]["status"] == "failed"
    assert "not healthy" in broken[0]["error"]
    assert "after 1 s" in broken[0]["error"]
    assert broken[1]["status"] == "failed"  # the rest of its runs are marked failed
    assert broken[1]["error"].startswith("not run: engine 'broken' not healthy")
    crashing = [v for k, v in runs.items() if "/crashing/" in k]
    assert "exited with code 3" in crashing[0]["error"]
    missing = [v for k, v in runs.items() if "/missing/" in k]
    assert "cannot start engine 'missing'" in missing[0]["error"]
    assert "no-such-engine-binary" in missing[0]["error"]
    assert [v["status"] for k, v in runs.items() if "/sgl/" in k] == ["done", "done"]


def test_engine_failure_stops_the_plan_when_configured(tmp_path, sglang_engine):
    good = f"  sgl:\n    kind: external\n    target: sglang\n    base_url: {sglang_engine.base_url}\n"
    plan = _plan(tmp_path, EXITS + good, extra="on_engine_failure: stop\n")
    with pytest.raises(ExperimentStopped, match="exited with code 3"):
        _run(plan, tmp_path)
    state = load_state(tmp_path, "exp-test")
    assert state.status == "stopped"
    assert not state.run_ids()


def test_interrupted_experiment_keeps_finished_runs_and_resumes(tmp_path, sglang_engine):
    good = f"  sgl:\n    kind: external\n    target: sglang\n    base_url: {sglang_engine.base_url}\n"
    phases = "phases:\n  - {name: p, kind: baseline, workloads: [short], concurrency: [1, 2, 4]}\n"
    plan = _plan(tmp_path, good, phases)
    calls: list[int] = []

    def interrupt_second(config: RunConfig) -> RunResult:
        calls.append(config.max_concurrency or 0)
        if len(calls) == 2:
            raise KeyboardInterrupt  # Ctrl-C between runs
        return run_benchmark_sync(config, progress=False)

    with pytest.raises(ExperimentInterrupted, match="loadgen experiment resume exp-test"):
        _run(plan, tmp_path, run_fn=interrupt_second)
    state = load_state(tmp_path, "exp-test")
    assert state.status == "interrupted"
    kept = state.run_ids()
    assert len(kept) == 1
    resumed_loads: list[int] = []

    def record(config: RunConfig) -> RunResult:
        resumed_loads.append(config.max_concurrency or 0)
        return run_benchmark_sync(config, progress=False)

    runner = ExperimentRunner(plan, state, run_fn=record, log=lambda _: None)
    final = runner.run()
    assert final.status == "done"
    assert resumed_loads == [2, 4]  # the finished run is not repeated
    assert final.run_ids()[0] == kept[0]
    assert len(final.run_ids()) == 3
    saved = json.loads((state.directory / "state.json").read_text())
    assert saved["status"] == "done"


def test_cli_rejects_bad_plans_before_anything_runs(tmp_path):
    plan = tmp_path / "bad.yaml"
    plan.write_text(
        "name: t\nengines:\n  a: {kind: external, base_url: 'http://127.0.0.1:1', target: vllm}\n"
        "phases:\n  - {name: p, kind: baseline, concurrency: [0]}\n"
        "  - {name: q, kind: nope, rate: [1]}\n"
    )
    result = CliRunner().invoke(experiment, ["run", str(plan), "--results-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert f"{plan}:5: concurrency values must be positive integers, got 0" in result.output
    assert f"{plan}:6: invalid phase 'q' kind 'nope'" in result.output
    assert not (tmp_path / "experiments").exists()
    missing = CliRunner().invoke(experiment, ["resume", "exp-nope", "--results-dir", str(tmp_path)])
    assert missing.exit_code == 2
    assert "no experiment 'exp-nope'" in missing.output


def test_launched_engine_is_stopped_before_an_external_engine_runs(tmp_path, sglang_engine):
    engines = (
        f"  sim:\n    kind: launch\n    command: {SIM.format(personality='vllm')}\n"
        "    restart_between_runs: false\n"
        f"  sgl:\n    kind: external\n    target: sglang\n    base_url: {sglang_engine.base_url}\n"
    )
    phases = "phases:\n  - {name: p, kind: baseline, workloads: [short], concurrency: [2]}\n"
    urls: list[str] = []
    still_up: list[bool] = []

    def run(config: RunConfig) -> RunResult:
        if urls:  # the external run: is the launched engine from the run before still answering?
            still_up.append(_answers(urls[0] + "/health"))
        urls.append(str(config.base_url))
        return run_benchmark_sync(config, progress=False)

    _run(_plan(tmp_path, engines, phases), tmp_path, run_fn=run)
    assert urls[1] == sglang_engine.base_url
    assert still_up == [False]


def _answers(url: str) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(url, timeout=1):
            return True
    except OSError:
        return False


def test_api_keys_reach_the_engine_but_no_file(tmp_path):
    secret = "sk-test-0123456789abcdef"
    command = f"{SIM.format(personality='vllm')} --api-key {secret}"
    engines = f"  sim:\n    kind: launch\n    command: {command}\n"
    phases = "phases:\n  - {name: p, kind: baseline, workloads: [short], concurrency: [2]}\n"
    plan = _plan(tmp_path, engines, phases)
    state = ExperimentState("exp-key", experiment_dir(tmp_path, "exp-key"), plan.name)
    runner = ExperimentRunner(
        plan,
        state,
        run_fn=lambda c: run_benchmark_sync(c, progress=False),
        log=lambda _: None,
        api_key=secret,
    )
    assert runner.run().status == "done"
    (run_id,) = state.run_ids()
    assert load_run(tmp_path, run_id).summary["requests"]["ok"] == 8  # the key was accepted
    leaked = [p for p in tmp_path.rglob("*") if p.is_file() and secret in p.read_text(errors="replace")]
    assert leaked == []
