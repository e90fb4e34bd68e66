"""One pass of a suite: every series once, through the plan runner, each run tagged and stored.

Each run's manifest gains `baseline: {suite, series, pass}` (the store's series key reads it). The
runs are written to the store as they finish; at the end of the pass every run folder of the results
dir is imported again (idempotent), so a store that was down for part of the pass loses no run once it
is back. A series whose engine never came up or whose run failed makes the pass `failed`. A pass
stopped by SIGTERM / SIGINT stores what it ran (the run in flight as partial) and raises PassInterrupted.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from loadgen.baseline.gate import suite_tag
from loadgen.baseline.stop import PassInterrupted
from loadgen.baseline.suite import Suite
from loadgen.config import RunConfig
from loadgen.experiments.runner import ExperimentInterrupted, ExperimentRunner, ExperimentStopped
from loadgen.experiments.state import DONE, ExperimentState, experiment_dir, new_experiment_id
from loadgen.records import RunResult
from loadgen.store.db import StoreError, open_store
from loadgen.store.importer import import_runs
from loadgen.store.url import StoreURL
from loadgen.store.writer import store_run

RunFn = Callable[[RunConfig], RunResult]
Log = Callable[[str], None]


@dataclass
class PassResult:
    """What one pass did: its id, `ok` or `failed`, and each series' entry of the runner's state."""

    pass_id: str
    outcome: str
    series: dict[str, dict[str, Any]] = field(default_factory=dict)

    def failures(self) -> list[str]:
        """One line per series that did not finish cleanly."""
        return [_failure(name, entry) for name, entry in self.series.items() if _failed(entry)]


def _failed(entry: dict[str, Any]) -> bool:
    return entry.get("status") != DONE or bool(entry.get("partial"))


def _failure(name: str, entry: dict[str, Any]) -> str:
    """`short-rate4: partial (run R): error rate 100% exceeded` or `name: failed: <error>`: the reason."""
    if entry.get("status") == DONE:  # a finished run that was partial: say why it was partial
        reason = entry.get("partial_reason") or "no reason recorded"
        return f"{name}: partial (run {entry.get('run_id')}): {reason}"
    return f"{name}: {entry.get('status')}: {entry.get('error') or 'no reason recorded'}"


def tagged(run_fn: RunFn, suite: str, pass_id: str, check: dict[str, Any]) -> RunFn:
    """`run_fn` whose runs carry `baseline: {suite, series, pass, metrics, check}` in their manifest."""

    def run(config: RunConfig) -> RunResult:
        series = (config.extra_manifest.get("experiment") or {}).get("phase")
        tag = {"suite": suite, "series": series, "pass": pass_id, **check}
        return run_fn(dataclasses.replace(config, extra_manifest={**config.extra_manifest, "baseline": tag}))

    return run


def storing_each(run_fn: RunFn, url: StoreURL | None, log: Log) -> RunFn:
    """`run_fn` that upserts each finished run's row (a store error is one warning, the run is kept)."""

    def run(config: RunConfig) -> RunResult:
        result = run_fn(config)
        store_run(url, config.results_dir, result.run_id, log)
        return result

    return run


def run_pass(
    suite: Suite,
    url: StoreURL | None,
    *,
    run_fn: RunFn,
    log: Log = print,
    api_key: str | None = None,
) -> PassResult:
    """Run every series of `suite` once (results under the suite's results_dir) and store the rows."""
    pass_id = new_experiment_id().replace("exp-", "pass-", 1)
    plan = suite.plan
    directory = experiment_dir(plan.results_dir, pass_id)
    directory.mkdir(parents=True, exist_ok=True)
    state = ExperimentState(pass_id, directory, f"baseline {suite.name}", plan.purpose)
    fn = storing_each(tagged(run_fn, suite.name, pass_id, suite_tag(suite.metrics, suite.detector)), url, log)
    runner = ExperimentRunner(plan, state, run_fn=fn, log=log, api_key=api_key)
    try:
        with contextlib.suppress(ExperimentStopped):  # plans of suites always continue; kept for safety
            runner.run()
    except ExperimentInterrupted as exc:  # SIGTERM / SIGINT: the run in flight is stored (partial)
        catch_up(url, plan.results_dir, log)
        raise PassInterrupted(f"pass {pass_id} interrupted: {exc}") from None
    catch_up(url, plan.results_dir, log)
    series = {key.split("/", 1)[0]: entry for key, entry in state.runs.items()}
    ok = len(series) == len(suite.series) and all(
        e.get("status") == DONE and not e.get("partial") for e in series.values()
    )
    return PassResult(pass_id, "ok" if ok else "failed", series)


def catch_up(url: StoreURL | None, results_dir: str, log: Log) -> None:
    """Import every run folder of the results dir (rows a store outage missed); a failure is a warning."""
    if url is None:
        return
    try:
        with open_store(url) as store:
            report = import_runs(store, results_dir)
    except StoreError as exc:
        log(f"warning: results store {url.public} still unreachable ({exc}); runs are kept in {results_dir}")
        return
    if report.counts["new"] or report.counts["updated"]:
        log(f"results store {url.public}: caught up ({report.line()})")
