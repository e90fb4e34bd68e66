"""A pass under trouble: the store down for part of it loses no run; an engine that never comes up makes
the pass failed, counted, and the next pass still runs on time."""

from __future__ import annotations

import contextlib
from datetime import timedelta
from pathlib import Path

from prometheus_client import CollectorRegistry

from loadgen.baseline.cycle import scheduled_pass
from loadgen.baseline.passrun import run_pass
from loadgen.baseline.schedule import Scheduler, SchedulerMetrics
from loadgen.baseline.suite import load_suite
from loadgen.config import RunConfig
from loadgen.records import RunResult
from loadgen.run.runner import run_benchmark_sync
from loadgen.store.db import open_store
from tests.baseline_support import START, SteppedClock, sim_command, write_suite
from tests.store_support import Backend, run_ids, store_url, stored

DEAD_ENGINE = "python -m simengine --personality vllm --port {port} --speed-factor 0"  # refused: exits


def test_a_store_outage_mid_pass_loses_no_run(tmp_path: Path, backend: Backend) -> None:
    results = tmp_path / "results"
    suite = load_suite(write_suite(tmp_path / "b.yaml", results, stepped=sim_command(), steady=sim_command()))
    with open_store(store_url(backend.url)):
        pass  # the store exists before the pass (an outage takes an existing one away)
    outage = contextlib.ExitStack()
    calls: list[str] = []

    def flaky_store_run(config: RunConfig) -> RunResult:
        calls.append(config.scenario or "")
        if len(calls) == 1:
            outage.enter_context(backend.outage())  # down while the first series runs and is stored
        else:
            outage.close()  # back for the second series
        return run_benchmark_sync(config)

    log: list[str] = []
    result = run_pass(suite, store_url(backend.url), run_fn=flaky_store_run, log=log.append)
    assert result.outcome == "ok"
    assert len(calls) == 2
    assert any("did not take run" in line and "loadgen store import" in line for line in log)
    assert set(stored(backend.url)) == set(run_ids(results))
    assert len(run_ids(results)) == 2


def test_a_dead_engine_fails_its_pass_and_the_next_runs_on_time(tmp_path: Path) -> None:
    results, suite = tmp_path / "results", tmp_path / "b.yaml"
    write_suite(suite, results, stepped=DEAD_ENGINE)
    url = store_url(f"sqlite:///{tmp_path / 'runs.db'}")

    def before_pass(n: int) -> None:
        if n == 2:  # the engine is fixed before the second pass
            write_suite(suite, results, stepped=sim_command())

    clock = SteppedClock(before_pass)
    metrics = SchedulerMetrics("e2e", CollectorRegistry())
    one = scheduled_pass(str(suite), url, run_fn=run_benchmark_sync, log=lambda m: None)
    Scheduler("0 2 * * *", one, metrics, clock=clock).run(passes=2)
    assert clock.waited_for == [START + timedelta(hours=1), START + timedelta(hours=25)]

    def sample(name: str, **labels: str) -> float | None:
        return metrics.registry.get_sample_value(name, {"suite": "e2e", **labels})

    assert sample("loadgen_baseline_passes_total", outcome="failed") == 1
    assert sample("loadgen_baseline_passes_total", outcome="ok") == 1
    assert sample("loadgen_baseline_last_pass_success") == 1
    assert len(run_ids(results)) == 1
    states = list((results / "experiments").glob("pass-*/state.json"))
    assert len(states) == 2
    assert sum('"status": "failed"' in p.read_text() for p in states) == 1
