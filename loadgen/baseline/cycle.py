"""One scheduled pass end to end: read the suite file again (edits apply from the next pass), run the
pass, check the store (its change points recorded, and annotated in Grafana when a URL is given); the
outcome the scheduler counts.

Confirmation runs: when the check leaves a series with an open *suspected* regression (its newest run
alone reads worse), the pass at once runs that series again, up to `confirm_runs` times (the suite's
`check:` setting), checking after each, until the suspicion is confirmed or cleared; a regression is
then decided in this pass instead of waiting for the next scheduled ones. A series whose newest run
is marked noisy in the store (loadgen.baseline.marks: the check left it out) is re-run the same way,
so the pass still gives the series a usable run."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable

from loadgen.baseline.annotate import annotate_changes
from loadgen.baseline.check import Finding, gating
from loadgen.baseline.gate import check_store
from loadgen.baseline.marks import noisy_newest
from loadgen.baseline.passrun import Log, RunFn, run_pass
from loadgen.baseline.schedule import PassOutcome
from loadgen.baseline.suite import Suite, load_suite
from loadgen.store.url import StoreURL


def suspected_series(findings: Iterable[Finding]) -> list[str]:
    """The series names (as in the suite) with an open suspected regression."""
    names = {
        f.series.split("@", 1)[0].split("/", 1)[1]
        for f in findings
        if f.worse and f.open and f.status == "suspected"
    }
    return sorted(names)


def only(suite: Suite, names: Iterable[str]) -> Suite:
    """The suite with only the named series."""
    wanted = set(names)
    phases = tuple(p for p in suite.plan.phases if p.name in wanted)
    return dataclasses.replace(suite, plan=dataclasses.replace(suite.plan, phases=phases))


def confirm(
    suite: Suite, url: StoreURL, findings: list[Finding], *, run_fn: RunFn, log: Log, api_key: str | None
) -> list[Finding]:
    """The confirmation runs after a pass (module docstring): the series with an open suspected
    regression or a noisy newest run, run again up to `confirm_runs` times; the findings after them."""
    for n in range(suite.detector.confirm_runs):
        noisy = noisy_newest(url, suite.name)
        suspects = sorted({*suspected_series(findings), *noisy})
        if not suspects:
            break
        why = ", ".join(f"{s} (newest run noisy: {noisy[s]})" if s in noisy else s for s in suspects)
        log(f"confirmation run {n + 1} of {suite.detector.confirm_runs}: {why}")
        run_pass(only(suite, suspects), url, run_fn=run_fn, log=log, api_key=api_key)
        findings = check_store(url, suite.name)
    return findings


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
        findings = confirm(suite, url, check_store(url, suite.name), run_fn=run_fn, log=log, api_key=api_key)
        failing = gating(findings, fail_on)
        annotate_changes(url, *grafana, log=log)
        if result.outcome != "ok":
            return PassOutcome("failed", len(failing))
        return PassOutcome("regression" if failing else "ok", len(failing))

    return one
