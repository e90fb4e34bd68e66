"""End to end (issue 12 "Done when"): 12 scheduled passes on the simulated engine, a 15% slower engine
reporting version 0.27.0 from pass 8 on -> one regression at pass 8, the version change named first;
a steady series of the same passes reports none. On SQLite and on a real PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from loadgen.baseline.check import gating, regressions
from loadgen.baseline.cycle import scheduled_pass
from loadgen.baseline.gate import check_store
from loadgen.baseline.history import read_history
from loadgen.baseline.schedule import Scheduler, SchedulerMetrics
from loadgen.run.runner import run_benchmark_sync
from loadgen.store.db import open_store
from tests.baseline_support import SteppedClock, sim_command, write_suite
from tests.store_support import Backend, loadgen, store_url

PASSES, STEP_AT = 12, 8


def _history(tmp_path: Path, backend: Backend) -> tuple[SchedulerMetrics, list[str]]:
    """Run the 12 passes; returns the scheduler's metrics and the stepped series' run ids by pass."""
    results = tmp_path / "results"
    suite = tmp_path / "baseline.yaml"
    write_suite(suite, results, stepped=sim_command(), steady=sim_command())

    def before_pass(n: int) -> None:
        if n == STEP_AT:  # the engine upgrade: slower steps, another version
            write_suite(suite, results, stepped=sim_command(1.15, "0.27.0"), steady=sim_command())

    url = store_url(backend.url)
    metrics = SchedulerMetrics("e2e", CollectorRegistry())
    one = scheduled_pass(str(suite), url, run_fn=run_benchmark_sync, log=lambda m: None)
    Scheduler("0 2 * * *", one, metrics, clock=SteppedClock(before_pass)).run(passes=PASSES)
    with open_store(url) as store:
        history = read_history(store, "e2e")
    stepped = next(runs for (_, key), runs in history.items() if key.startswith("e2e/stepped@"))
    return metrics, [run.run_id for run in stepped]


@pytest.mark.timeout(900)  # 12 passes of two series: about 2 minutes a database on 2 cores
def test_one_regression_at_the_step_named_by_the_version(tmp_path: Path, backend: Backend) -> None:
    metrics, stepped_runs = _history(tmp_path, backend)
    assert len(stepped_runs) == PASSES
    findings = check_store(store_url(backend.url), "e2e")
    found = regressions(findings)
    assert list(found) == [("e2e", "e2e/stepped@no-gpu-facts", stepped_runs[STEP_AT - 1])]
    moved = {f.metric for f in found[next(iter(found))]}
    assert {"tpot_p99", "e2e_p99", "request_throughput"} <= moved
    for finding in found[next(iter(found))]:
        assert finding.status == "confirmed"
        assert finding.last_before == stepped_runs[STEP_AT - 2]
        first = finding.causes[0]
        assert (first["key"], first["a"], first["b"]) == ("engine.version", "0.26.0", "0.27.0")
    assert not [f for f in findings if f.series.startswith("e2e/steady@")]
    assert gating(findings)
    result = loadgen("baseline", "check", "--suite", "e2e", "--store", backend.url)
    assert result.exit_code == 1, result.output
    assert "1. engine.version: 0.26.0 -> 0.27.0" in result.output
    steady = loadgen("baseline", "check", "--suite", "e2e", "--series", "steady", "--store", backend.url)
    assert (steady.exit_code, steady.output.strip()) == (0, "no change points")
    counted = {
        outcome: metrics.registry.get_sample_value(
            "loadgen_baseline_passes_total", {"suite": "e2e", "outcome": outcome}
        )
        for outcome in ("ok", "regression", "failed")
    }
    # the gate fails from the pass that confirms the step (pass 9 at the earliest), never before it
    assert 1 <= (counted["regression"] or 0) <= PASSES - STEP_AT
    assert (counted["ok"], counted["failed"]) == (PASSES - (counted["regression"] or 0), 0)
