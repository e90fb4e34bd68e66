"""Findings as rows of the store's `changes` table (pure: no I/O)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from loadgen.baseline.causes import NO_DIFFERENCE
from loadgen.baseline.check import Finding
from loadgen.baseline.history import StoredRun
from loadgen.baseline.metrics import WATCHED
from loadgen.store.rows import finite_json, number, timestamp


def top_cause(finding: Finding) -> str:
    """The top-ranked recorded difference as text, `engine.version: 0.26.0 -> 0.27.0`, or
    `NO_DIFFERENCE` when the two runs' records differ in nothing that can be a cause."""
    if not finding.causes:
        return NO_DIFFERENCE
    first = finding.causes[0]
    return f"{first['key']}: {first['a']} -> {first['b']}"


def started_times(history: Mapping[tuple[str, str], Sequence[StoredRun]]) -> dict[str, str]:
    """run_id -> start time (ISO) of every run of the history."""
    return {run.run_id: run.started_at for runs in history.values() for run in runs}


def change_row(finding: Finding, started: Mapping[str, str]) -> dict[str, Any]:
    """The `changes` row of one finding (the store fills detected_at, closed_at, annotation_id)."""
    watched = WATCHED[finding.metric]
    return {
        "suite": finding.suite,
        "series_key": finding.series,
        "metric": finding.metric,
        "metric_label": watched.label,
        "unit": watched.unit,
        "kind": finding.kind,
        "status": finding.status,
        "relative_size": number(finding.relative),
        "before_median": number(finding.before_median),
        "after_median": number(finding.after_median),
        "p_value": number(finding.p_value),
        "last_run_before": finding.last_before,
        "last_before_at": timestamp(started.get(finding.last_before)),
        "first_run_after": finding.first_after,
        "first_after_at": timestamp(finding.first_after_at),
        "cause": top_cause(finding),
        "causes": finite_json(list(finding.causes)),
        "open": finding.open,
    }


def change_rows(findings: Iterable[Finding], started: Mapping[str, str]) -> list[dict[str, Any]]:
    """The rows of every finding."""
    return [change_row(f, started) for f in findings]
