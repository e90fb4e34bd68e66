"""The check (pure): change points per series and metric over stored runs, each explained by the ranked
manifest diff between the last run before it and the first run after it (loadgen.baseline.causes).

Only runs with status `ok` count (failed, partial and crashed runs are left out), and runs whose own
record says they were unreliable (loadgen.baseline.noisy) are left out of the test. Every watched
metric shares one false-alarm budget (loadgen.baseline.decide); the error rate is tested as counts
(errors out of requests). A rate series does not watch the throughput its schedule fixes. A change is *open*
when it is the latest change of its series and metric; an open, worse, confirmed change is a
regression the gate fails on (a suspected one only with `fail_on="suspected"`). Improvements are
reported, never alarmed on.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from loadgen.analysis.changepoint import Change, DetectorSettings
from loadgen.analysis.counts import Counts
from loadgen.analysis.diff import manifest_differences
from loadgen.analysis.drift import Drift
from loadgen.baseline.causes import recorded_causes
from loadgen.baseline.decide import COUNT_METRICS, decide, drifts
from loadgen.baseline.history import StoredRun
from loadgen.baseline.metrics import WATCHED
from loadgen.baseline.noisy import latency_only, noisy_reasons

SCHEDULE_FIXED = frozenset({"request_throughput", "output_throughput"})  # set by a rate series' schedule
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
    missing: tuple[str, ...] = ()  # facts one of the two runs did not record (not ranked)
    slope: float | None = None  # a drift: relative change per run (kind `drift`, never gated)

    @property
    def relative(self) -> float:
        """after / before - 1 (0.15: the figure is 15% higher after the change)."""
        return self.after_median / self.before_median - 1.0 if self.before_median else math.inf

    @property
    def kind(self) -> str:
        """regression | improvement | drift."""
        if self.slope is not None:
            return "drift"
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
            "missing": list(self.missing),
            "slope_per_run": self.slope,
        }


def causes(before: StoredRun, after: StoredRun) -> tuple[tuple[dict[str, Any], ...], tuple[str, ...]]:
    """The differences of the two runs that can be causes (most likely first), and the missing facts."""
    return recorded_causes(before.manifest, after.manifest, before.summary, after.summary)


def noisy_runs(runs: Sequence[StoredRun], settings: DetectorSettings | None = None) -> dict[str, list[str]]:
    """run id -> why its record says it is unreliable, for the ok runs that are."""
    out = {}
    for run in runs:
        if run.status == "ok" and (reasons := noisy_reasons(run.summary, run.manifest, settings)):
            out[run.run_id] = reasons
    return out


def rate_series(runs: Sequence[StoredRun]) -> bool:
    """Whether the newest run was paced by a request rate (its throughput is the schedule's)."""
    rate = runs[-1].typed.config.get("rate") if runs else None
    return isinstance(rate, int | float) and not isinstance(rate, bool) and math.isfinite(rate) and rate > 0


def watched_metrics(runs: Sequence[StoredRun], metrics: Iterable[str]) -> list[str]:
    """The metrics a check of these runs watches: a rate series' schedule-fixed throughput left out."""
    fixed = SCHEDULE_FIXED if rate_series(runs) else frozenset()
    return [m for m in metrics if m not in fixed]


def _counts(runs: Sequence[StoredRun], noisy: Mapping[str, list[str]]) -> Counts | None:
    """Failed out of finished requests per run (0 of 0 for a noisy run); None when no run has them."""
    events: list[int] = []
    trials: list[int] = []
    for run in runs:
        requests = run.summary.get("requests")
        ok, failed = (
            (requests.get("ok"), requests.get("failed")) if isinstance(requests, dict) else (None, None)
        )
        usable = isinstance(ok, int) and isinstance(failed, int)
        if run.run_id in noisy and not latency_only(noisy[run.run_id]):
            usable = False
        events.append(int(failed) if usable and isinstance(failed, int) else 0)
        trials.append(
            int(ok) + int(failed) if usable and isinstance(ok, int) and isinstance(failed, int) else 0
        )
    return Counts(events, trials) if any(trials) else None


def check_series(
    suite: str, series: str, runs: Sequence[StoredRun], metrics: Iterable[str], settings: DetectorSettings
) -> list[Finding]:
    """Every change of each watched metric in one series' runs (oldest first; non-ok runs dropped,
    noisy ones left out of the test)."""
    kept = [run for run in runs if run.status == "ok"]
    noisy = noisy_runs(kept, settings)
    wanted = watched_metrics(kept, metrics)
    figures = {m: [math.nan if r.run_id in noisy else _value(r.figures.get(m)) for r in kept] for m in wanted}
    counts = _counts(kept, noisy) if COUNT_METRICS & set(wanted) else None
    out: list[Finding] = []
    for metric, changes in decide(figures, counts, settings).items():
        for n, change in enumerate(changes):
            last = n == len(changes) - 1
            out.append(_finding(suite, series, metric, kept, change, last, settings.min_after))
    for metric, drift in drifts(figures, settings).items():
        stepped = any(
            f.metric == metric and f.open and _index(kept, f.first_after) >= drift.start for f in out
        )
        if drift.worse and not stepped:
            out.append(_drift_finding(suite, series, metric, kept, drift))
    return out


def _index(runs: Sequence[StoredRun], run_id: str) -> int:
    return next((i for i, r in enumerate(runs) if r.run_id == run_id), -1)


def _drift_finding(suite: str, series: str, metric: str, runs: Sequence[StoredRun], drift: Drift) -> Finding:
    """A drift over the newest runs as a finding of kind `drift` (its slope; never gated)."""
    first, newest = runs[drift.start], runs[drift.end]
    before = runs[max(drift.start - 1, 0)]
    a, b = first.figures.get(metric), newest.figures.get(metric)
    return Finding(
        suite,
        series,
        metric,
        "confirmed",
        True,
        True,
        float(a) if a is not None else math.nan,
        float(b) if b is not None else math.nan,
        drift.p_value,
        before.run_id,
        first.run_id,
        first.started_at,
        slope=drift.slope,
    )


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
    ranked, missing = causes(before, after)
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
        ranked,
        missing,
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
    return [f for f in findings if f.kind == "regression" and f.open and f.status in statuses]


def regressions(findings: Iterable[Finding]) -> dict[tuple[str, str, str], list[Finding]]:
    """Worse changes grouped by (suite, series, first run after): one regression, the metrics it moved."""
    out: dict[tuple[str, str, str], list[Finding]] = {}
    for finding in findings:
        if finding.kind == "regression":
            out.setdefault((finding.suite, finding.series, finding.first_after), []).append(finding)
    return out
