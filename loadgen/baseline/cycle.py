"""One scheduled pass end to end: read the suite file again (edits apply from the next pass), run the
pass, check the store (its change points recorded, and annotated in Grafana when a URL is given); the
outcome the scheduler counts."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from loadgen.baseline.annotate import annotate_changes
from loadgen.baseline.check import gating
from loadgen.baseline.gate import check_store
from loadgen.baseline.passrun import Log, RunFn, run_pass
from loadgen.baseline.schedule import PassOutcome
from loadgen.baseline.suite import load_suite
from loadgen.store.url import StoreURL


def scheduled_pass(
    suite_file: str,
    url: StoreURL,
    *,
    run_fn: RunFn,
    results_dir: str | None = None,
    fail_on: str = "confirmed",
    log: Log = print,
    api_key: str | None = None,
    grafana: tuple[str | None, str | None] = (None, None),
) -> Callable[[], PassOutcome]:
    """The scheduler's pass: failed (the pass or the check broke), regression (the gate fails) or ok;
    `grafana` is (URL, token) of the Grafana that change points are annotated in (URL None: none)."""

    def one() -> PassOutcome:
        suite = load_suite(suite_file)
        if results_dir:
            suite = dataclasses.replace(suite, plan=dataclasses.replace(suite.plan, results_dir=results_dir))
        result = run_pass(suite, url, run_fn=run_fn, log=log, api_key=api_key)
        for line in result.failures():
            log(f"  failed: {line}")
        failing = gating(check_store(url, suite.name), fail_on)
        annotate_changes(url, *grafana, log=log)
        if result.outcome != "ok":
            return PassOutcome("failed", len(failing))
        return PassOutcome("regression" if failing else "ok", len(failing))

    return one
