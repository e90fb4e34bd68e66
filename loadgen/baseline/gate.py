"""The check over a store: read the history, take each suite's watched metrics and detector settings
from its newest run (the suite file's `metrics:` and `check:` are recorded in every run's manifest),
find the change points and record them in the store's `changes` table, and mark the noisy runs in
the `runs` table (loadgen.baseline.marks). Also the exit status of
`baseline run` and `baseline check`."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from loadgen.analysis.changepoint import DetectorSettings
from loadgen.baseline.changes import change_rows, started_times
from loadgen.baseline.check import Finding, check_all, gating, noisy_runs
from loadgen.baseline.history import StoredRun, read_history
from loadgen.baseline.marks import marks, write_marks
from loadgen.baseline.metrics import DEFAULT_METRICS, WATCHED
from loadgen.store.changes import write_changes
from loadgen.store.db import open_store
from loadgen.store.url import StoreURL

EXIT_OK, EXIT_REGRESSION, EXIT_BAD_INPUT, EXIT_PASS_FAILED = 0, 1, 2, 3


def suite_tag(metrics: Sequence[str], settings: DetectorSettings) -> dict[str, Any]:
    """What a run records of its suite's check: the watched metrics and the detector's settings."""
    return {"metrics": list(metrics), "check": dataclasses.asdict(settings)}


def recorded_check(runs: Sequence[StoredRun]) -> tuple[tuple[str, ...], DetectorSettings]:
    """The metrics and settings the newest run of a suite recorded (defaults for runs that lack them)."""
    tag = runs[-1].typed.baseline if runs else {}
    metrics = tuple(m for m in tag.get("metrics") or DEFAULT_METRICS if m in WATCHED)
    known = {f.name for f in dataclasses.fields(DetectorSettings)}
    values = {k: v for k, v in (tag.get("check") or {}).items() if k in known}
    return metrics, DetectorSettings(**values)


def check_store(
    url: StoreURL, suite: str | None = None, series: str | None = None, *, now: datetime | None = None
) -> list[Finding]:
    """Every change point of the stored baseline series (of one suite / series when named), recorded
    in the `changes` table (the checked series' changes it no longer finds are closed)."""
    with open_store(url) as store:
        history = read_history(store, suite)
        findings = check_history(history, series)
        checked = [key for key in history if in_scope(key, series)]
        write_changes(store, change_rows(findings, started_times(history)), checked, now or datetime.now(UTC))
        scoped = {key: history[key] for key in checked}
        write_marks(store, marks(scoped, suite_settings(history)))
    return findings


def suite_settings(history: Mapping[tuple[str, str], Sequence[StoredRun]]) -> dict[str, DetectorSettings]:
    """suite -> the detector settings its newest run recorded (what the check decides with)."""
    out = {}
    for name in {s for s, _ in history}:
        newest = max((r for k, r in history.items() if k[0] == name), key=lambda runs: runs[-1].started_at)
        out[name] = recorded_check(newest)[1]
    return out


def readiness(url: StoreURL, suite: str) -> list[str]:
    """The store, then per series how many usable runs it has (ok, not noisy) and how many a check
    needs before it can place a first change (min_before + min_after)."""
    with open_store(url) as store:
        history = read_history(store, suite)
    lines = [f"results store {url.public}: {len(history)} series of suite {suite!r}"]
    for (_, key), runs in sorted(history.items()):
        _, settings = recorded_check(runs)
        usable = sum(r.status == "ok" for r in runs) - len(noisy_runs(runs, settings))
        need = settings.min_before + settings.min_after
        left = f"{need - usable} more before a check can decide" if usable < need else "enough to decide"
        lines.append(f"  {key}: {usable} usable run(s), needs {need} (min_before + min_after): {left}")
    return lines


def in_scope(key: tuple[str, str], series: str | None) -> bool:
    """Whether a (suite, series key) is checked when `--series` is `series` (None: every series)."""
    return series is None or key[1].split("@", 1)[0] == f"{key[0]}/{series}"


def check_history(
    history: Mapping[tuple[str, str], Sequence[StoredRun]], series: str | None = None
) -> list[Finding]:
    """The findings of a read history, each suite with the metrics and settings its newest run recorded."""
    findings: list[Finding] = []
    for name in sorted({s for s, _ in history}):
        part = {key: runs for key, runs in history.items() if key[0] == name}
        newest = max(part.values(), key=lambda runs: runs[-1].started_at)
        metrics, settings = recorded_check(newest)
        findings += check_all(part, metrics, settings, series)
    return findings


def exit_status(findings: Sequence[Finding], fail_on: str, pass_failed: bool = False) -> int:
    """3 the pass failed, 1 an open regression the gate fails on, else 0."""
    if pass_failed:
        return EXIT_PASS_FAILED
    return EXIT_REGRESSION if gating(findings, fail_on) else EXIT_OK
