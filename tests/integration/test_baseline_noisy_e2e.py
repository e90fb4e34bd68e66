"""End to end (issue 20 "Done when") on the simulated engine and SQLite: an unrecorded 30% slowdown
names no cause and says `no recorded difference`; a single run of a stalled host (30% slow, then a
run 4.5% slow) opens nothing; SIGTERM mid-pass of `baseline schedule` exits 0 promptly with the run
in flight recorded. (A version change found and named first: tests/integration/test_baseline_e2e.py.)"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

import loadgen.results.manifest as manifest_module
from loadgen.baseline.causes import NO_DIFFERENCE
from loadgen.baseline.check import noisy_runs
from loadgen.baseline.cycle import scheduled_pass
from loadgen.baseline.gate import check_store, readiness, recorded_check
from loadgen.baseline.history import read_history
from loadgen.baseline.marks import stored_marks
from loadgen.baseline.schedule import Scheduler, SchedulerMetrics
from loadgen.config import RunConfig
from loadgen.records import RunResult
from loadgen.run.runner import run_benchmark_sync
from loadgen.store.db import open_store
from loadgen.store.url import StoreURL
from tests.baseline_support import SteppedClock
from tests.store_support import loadgen, store_url

PASSES, SLOW_AT = 11, 7
STALLED_AT = 6  # the noisy series' one run on a stalled host (1-based pass)


def _engine(factor_file: Path) -> str:
    """A simulated vLLM whose speed factor is read from a file inside the engine's process: the same
    command line (its own and the one the process table shows) whatever the file says, as an
    unrecorded slowdown is."""
    code = (
        "import runpy, sys; "
        f"sys.argv += ['--speed-factor', open('{factor_file}').read().strip()]; "
        "runpy.run_module('simengine', run_name='__main__')"
    )
    sim = "--personality vllm --port {port} --time-scale 0.1 --gpu h200 --version 0.26.0"
    return f'{sys.executable} -c "{code}" {sim}'


def _suite(path: Path, results: Path, factors: dict[str, Path]) -> Path:
    engines = {
        f"{n}-engine": {"kind": "launch", "target": "vllm", "command": _engine(f), "health_timeout_s": 30}
        for n, f in factors.items()
    }
    series = [{"name": n, "engine": f"{n}-engine", "workload": "tiny", "concurrency": 8} for n in factors]
    suite = {
        "name": "noisy",
        "results_dir": str(results),
        "defaults": {"num_prompts": 64, "seed": 7, "metrics_port": 0, "request_timeout": "60s"},
        "engines": engines,
        "workloads": {"tiny": {"input_len": 32, "output_len": 8}},
        "metrics": ["tpot_p99", "e2e_p99", "request_throughput"],
        # as tests/baseline_support.write_suite (a loaded machine drifts ~5% between runs), and a load
        # bound far over any real one: only the stalled host's reading crosses it
        "check": {
            "min_before": 5,
            "min_regime": 5,
            "min_relative": 0.08,
            "alpha": 0.0015,
            "improvement_alpha": 0.0005,
            "loo_alpha": 1.0,
            "min_shift": 0.01,
            "max_load_per_cpu": 50.0,
            "confirm_runs": 2,
        },
        "series": series,
    }
    path.write_text(yaml.safe_dump(suite, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """11 passes of a `hidden` series (30% slower from pass 7, nothing recorded) and a `noisy` one
    (pass 6 30% slow on a host whose record says it was stalled, pass 7 4.5% slow)."""
    tmp = tmp_path_factory.mktemp("noisy")
    factors = {"hidden": tmp / "hidden.factor", "noisy": tmp / "noisy.factor"}
    for f in factors.values():
        f.write_text("1.0")
    suite = _suite(tmp / "baseline.yaml", tmp / "results", factors)
    url = store_url(f"sqlite:///{tmp / 'store.db'}")
    current = {"pass": 0}

    def before_pass(n: int) -> None:
        current["pass"] = n
        factors["hidden"].write_text("1.3" if n >= SLOW_AT else "1.0")
        factors["noisy"].write_text({STALLED_AT: "1.3", STALLED_AT + 1: "1.045"}.get(n, "1.0"))

    def run_fn(config: RunConfig) -> RunResult:
        series = (config.extra_manifest.get("baseline") or {}).get("series")
        if series != "noisy" or current["pass"] != STALLED_AT or current.get("stalled"):
            return run_benchmark_sync(config)
        real = manifest_module.host_load
        # a host stalled by a noisy neighbour cannot be made on demand: its load reading is mocked
        manifest_module.host_load = lambda: {"loadavg_1m": 800.0, "loadavg_1m_per_cpu": 100.0}
        try:
            return run_benchmark_sync(config)
        finally:
            manifest_module.host_load = real
            current["stalled"] = 1  # the neighbour leaves: the pass's re-run measures the engine alone
            factors["noisy"].write_text("1.0")

    one = scheduled_pass(str(suite), url, run_fn=run_fn, log=lambda m: None)
    Scheduler("0 2 * * *", one, SchedulerMetrics("noisy"), clock=SteppedClock(before_pass)).run(passes=PASSES)
    with open_store(url) as store:
        runs = read_history(store, "noisy")
    return {
        "url": url,
        "store": f"sqlite:///{tmp / 'store.db'}",
        "runs": {key.split("@")[0].split("/")[1]: r for (_, key), r in runs.items()},
        "tmp": tmp,
    }


@pytest.mark.timeout(900)
def test_an_unrecorded_slowdown_names_no_cause(history: dict[str, Any]) -> None:
    findings = [f for f in check_store(history["url"], "noisy") if f.series.startswith("noisy/hidden@")]
    hidden = history["runs"]["hidden"]
    worse = [f for f in findings if f.worse and f.open]
    assert worse, findings
    for finding in worse:
        assert finding.first_after == hidden[SLOW_AT - 1].run_id
        assert finding.causes == (), [(c["key"], c["a"], c["b"]) for c in finding.causes]
    result = loadgen(
        "baseline", "check", "--suite", "noisy", "--series", "hidden", "--store", history["store"]
    )
    assert result.exit_code == 1, result.output
    assert NO_DIFFERENCE in result.output
    assert "config:" not in result.output  # no count of per-pass keys posing as a cause


@pytest.mark.timeout(900)
def test_one_run_of_a_stalled_host_opens_nothing(history: dict[str, Any]) -> None:
    runs = history["runs"]["noisy"]
    stalled = runs[STALLED_AT - 1]
    assert stalled.figures["tpot_p99"] > 1.15 * runs[STALLED_AT - 2].figures["tpot_p99"]  # it was slow
    assert list(noisy_runs(runs, None)) == []  # the load bound is off by default ...
    _, settings = recorded_check(runs)
    assert noisy_runs(runs, settings) == {stalled.run_id: ["host load: load average 100.0 per CPU > 50"]}
    # the scheduler re-ran the series at once (its newest run was noisy): one run more than passes, the
    # re-run usable (the noisy runs above are the stalled one only)
    assert len(runs) == PASSES + 1
    lines = readiness(history["url"], "noisy")
    assert any("noisy/noisy@" in line and f": {PASSES} usable run(s)" in line for line in lines), lines
    findings = [f for f in check_store(history["url"], "noisy") if f.series.startswith("noisy/noisy@")]
    assert not [f for f in findings if f.worse and f.open], findings
    # the store keeps the mark, and the check says which run it left out and why
    key = next(k for (_, k) in read_history_keys(history["url"]) if k.startswith("noisy/noisy@"))
    with open_store(history["url"]) as store:
        assert stored_marks(store, key) == {stalled.run_id: "host load: load average 100.0 per CPU > 50"}
    result = loadgen(
        "baseline", "check", "--suite", "noisy", "--series", "noisy", "--store", history["store"]
    )
    assert result.exit_code == 0, result.output
    assert f"left out of the check: noisy run {stalled.run_id} of {key} (host load" in result.stderr


def read_history_keys(url: StoreURL) -> list[tuple[str, str]]:
    with open_store(url) as store:
        return list(read_history(store, "noisy"))


@pytest.mark.timeout(300)
def test_sigterm_mid_pass_exits_promptly_with_the_run_recorded(tmp_path: Path) -> None:
    factor = tmp_path / "f.factor"
    factor.write_text("1.0")
    suite = _suite(tmp_path / "b.yaml", tmp_path / "results", {"long": factor})
    text = yaml.safe_load(suite.read_text())
    text["defaults"]["num_prompts"] = 100000  # a run far longer than the test
    suite.write_text(yaml.safe_dump(text))
    store = f"sqlite:///{tmp_path / 'store.db'}"
    argv = [
        sys.executable,
        "-m",
        "loadgen.cli.main",
        "baseline",
        "schedule",
        str(suite),
        "--cron",
        "* * * * * *",
    ]
    argv += ["--metrics-port", "0", "--store", store]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    log = tmp_path / "schedule.log"
    with log.open("w") as err, subprocess.Popen(argv, stdout=err, stderr=err, env=env) as proc:
        deadline = time.monotonic() + 180
        while not list((tmp_path / "results").glob("*/requests.jsonl")) and time.monotonic() < deadline:
            assert proc.poll() is None, log.read_text()
            time.sleep(0.2)
        time.sleep(3)  # the run is sending requests
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
        waited = time.monotonic() - sent
    output = log.read_text()
    assert proc.returncode == 0, output
    assert waited < 60, output
    assert "results store" in output
    assert "next baseline pass at" in output
    assert "schedule stopped by SIGTERM" in output
    with open_store(store_url(store)) as opened:
        runs = read_history(opened, "noisy")
    (recorded,) = [r for series in runs.values() for r in series]
    assert recorded.status != "ok"  # the interrupted run is stored, marked partial
