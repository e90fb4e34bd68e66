"""The check (pure): change points per series and metric over stored runs, each explained by the ranked
manifest diff between the last run before it and the first run after it.

Only runs with status `ok` count (failed, partial and crashed runs are left out). A change is *open*
when it is the latest change of its series and metric; an open, worse, confirmed change is a
regression the gate fails on (a suspected one only with `fail_on="suspected"`). Improvements are
reported, never alarmed on.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from loadgen.analysis.changepoint import Change, DetectorSettings, detect
from loadgen.analysis.diff import manifest_differences
from loadgen.baseline.history import StoredRun
from loadgen.baseline.metrics import WATCHED

CAUSES_KEPT = 10  # ranked manifest differences kept per change
FAIL_ON = ("confirmed", "suspected")


@dataclass(frozen=True)
class Finding:
    """One change of one metric of one series, with the runs around it and what changed between them."""

    suite: str
    series: str
    metric: str
    status: str
    worse: bool
    open: bool
    before_median: float
    after_median: float
    p_value: float
    last_before: str
    first_after: str
    first_after_at: str
    causes: tuple[dict[str, Any], ...] = field(default_factory=tuple)

    @property
    def relative(self) -> float:
        """after / before - 1 (0.15: the figure is 15% higher after the change)."""
        return self.after_median / self.before_median - 1.0 if self.before_median else math.inf

    @property
    def kind(self) -> str:
        """regression | improvement."""
        return "regression" if self.worse else "improvement"

    def as_dict(self) -> dict[str, Any]:
        """The JSON form of `loadgen baseline check --json`."""
        watched = WATCHED[self.metric]
        return {
            "suite": self.suite,
            "series": self.series,
            "metric": self.metric,
            "label": watched.label,
            "unit": watched.unit,
            "higher_is_better": watched.higher_is_better,
            "kind": self.kind,
            "status": self.status,
            "open": self.open,
            "before_median": self.before_median,
            "after_median": self.after_median,
            "relative": self.relative,
            "p_value": self.p_value,
            "last_run_before": self.last_before,
            "first_run_after": self.first_after,
            "first_run_after_at": self.first_after_at,
            "causes": list(self.causes),
        }


def causes(before: StoredRun, after: StoredRun) -> tuple[dict[str, Any], ...]:
    """The manifest differences of the two runs, most likely cause first."""
    rows = manifest_differences(before.manifest, after.manifest, before.summary, after.summary)
    return tuple(row.as_dict(rank) for rank, row in enumerate(rows[:CAUSES_KEPT], start=1))


def check_series(
    suite: str, series: str, runs: Sequence[StoredRun], metrics: Iterable[str], settings: DetectorSettings
) -> list[Finding]:
    """Every change of each watched metric in one series' runs (oldest first; non-ok runs dropped)."""
    kept = [run for run in runs if run.status == "ok"]
    out: list[Finding] = []
    for metric in metrics:
        watched = WATCHED[metric]
        values = [_value(run.figures.get(metric)) for run in kept]
        changes = detect(values, higher_is_better=watched.higher_is_better, settings=settings)
        for n, change in enumerate(changes):
            last = n == len(changes) - 1
            out.append(_finding(suite, series, metric, kept, change, last, settings.min_after))
    return out


def _value(value: float | None) -> float:
    return math.nan if value is None else value


# kinds of manifest difference that say the environment changed (not a measurement, not context)
ENVIRONMENT_KINDS = frozenset({"engine", "version", "model", "endpoint", "params", "workload", "gpu"})
SNAP_RUNS = 2  # a change is moved to an environment change at most this many runs away


def environment_changed(before: StoredRun, after: StoredRun) -> bool:
    """True when the two runs' manifests differ in a fact of the environment (engine, version,
    model, endpoint, launch parameters, workload definition, GPU)."""
    rows = manifest_differences(before.manifest, after.manifest)
    return any(row.group in ENVIRONMENT_KINDS for row in rows)


def placed(runs: Sequence[StoredRun], index: int) -> int:
    """Where the new level begins: the statistics' index, unless exactly one run within SNAP_RUNS of
    it is the first of a changed environment (an upgrade, a flag): the manifest knows better where a
    shift began than a few noisy runs do."""
    return snapped(index, len(runs), lambda j: environment_changed(runs[j - 1], runs[j]))


def snapped(index: int, n: int, changed_at: Callable[[int], bool]) -> int:
    """`placed` over any history of `n` runs: `changed_at(j)` says run j is the first of a changed
    environment (the bench feeds it synthetic histories)."""
    near = range(max(index - SNAP_RUNS, 1), min(index + SNAP_RUNS, n - 1) + 1)
    changed = [j for j in near if changed_at(j)]
    return changed[0] if len(changed) == 1 else index


def _finding(
    suite: str,
    series: str,
    metric: str,
    runs: Sequence[StoredRun],
    change: Change,
    last: bool,
    min_after: int = 2,
) -> Finding:
    index = placed(runs, change.index)
    before, after = runs[max(index - 1, 0)], runs[index]
    status = change.status
    if status == "confirmed" and len(runs) - index < min_after:
        # the manifest placed it later than the statistics did: too few runs at the new level to
        # confirm it yet (only confirmed changes fail the gate); the next run decides
        status = "suspected"
    return Finding(
        suite,
        series,
        metric,
        status,
        change.worse,
        last,
        change.before_median,
        change.after_median,
        change.p_value,
        before.run_id,
        after.run_id,
        after.started_at,
        causes(before, after),
    )


def check_all(
    history: Mapping[tuple[str, str], Sequence[StoredRun]],
    metrics: Iterable[str],
    settings: DetectorSettings,
    series: str | None = None,
) -> list[Finding]:
    """Findings of every (suite, series key) of the history; `series` keeps keys naming that series."""
    wanted = list(metrics)
    out: list[Finding] = []
    for (suite, key), runs in sorted(history.items()):
        if series is None or key.split("@", 1)[0] == f"{suite}/{series}":
            out += check_series(suite, key, runs, wanted, settings)
    return out


def gating(findings: Iterable[Finding], fail_on: str = "confirmed") -> list[Finding]:
    """The open regressions the gate fails on: confirmed ones (and suspected ones when asked)."""
    statuses = FAIL_ON[: FAIL_ON.index(fail_on) + 1]
    return [f for f in findings if f.worse and f.open and f.status in statuses]


def regressions(findings: Iterable[Finding]) -> dict[tuple[str, str, str], list[Finding]]:
    """Worse changes grouped by (suite, series, first run after): one regression, the metrics it moved."""
    out: dict[tuple[str, str, str], list[Finding]] = {}
    for finding in findings:
        if finding.worse:
            out.setdefault((finding.suite, finding.series, finding.first_after), []).append(finding)
    return out
