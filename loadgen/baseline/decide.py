"""How one check decides over every metric a series watches (pure): one false-alarm budget per check.

A check watches several metrics at once (TTFT/TPOT/E2E percentiles, throughput, error rate), and a
run that reads slow moves several of them together; testing each at `alpha` would raise a false
alarm on *some* metric far more often than `alpha` (bench/baseline_checks.py measured 6.1 checks
with a false alarm per 100 step-free runs at 1.0 per metric). So `alpha` is the check's budget,
family-wise over its watched metrics: each metric is tested at `alpha / m` (Bonferroni over the m
watched metrics). Bonferroni holds whatever the metrics' correlation (they are correlated, which
makes it conservative, not wrong). It costs recall: a step must stand out on one metric at its
share of the budget (the bench measures how much, docs/baselines.md). The leave-one-out and
suspicion thresholds are split the same way. Improvements keep their own (stricter) threshold: they
are never alarmed on.

Counts (error rate: errors out of requests) are tested by `loadgen.analysis.counts` (Fisher's exact
test on the pooled counts) at the same per-metric share of the budget.

Drift: a change whose runs sit where the trend of the runs before it puts them
(`loadgen.analysis.drift.trend_explains`) is drift, not a step: it raises no alarm.
`drifts` reports the drift of each metric's newest runs as its own kind, with its slope.

Cost: a check scans the last `SCAN_WINDOW` runs of a series only (the detector compares at most
`max_before` runs before a candidate, so older runs change nothing but where the scan starts): a check
of a 1,000-run series costs what one of 60 runs does. A change older than the window is kept in the
store's `changes` table as it was last found.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from loadgen.analysis.changepoint import Change, DetectorSettings, detect, raised, suspected_at
from loadgen.analysis.counts import Counts, count_changes, count_raised
from loadgen.analysis.drift import Drift, drift_at, trend_explains
from loadgen.baseline.joint import groups, joint_changes, merged
from loadgen.baseline.metrics import WATCHED

COUNT_METRICS = frozenset({"error_rate"})  # metrics with a count form (errors out of requests)
SCAN_WINDOW = 60  # runs of a series a check scans (the newest): max_before (30) + 30 (at 90, with the
# combined tests, a check of a 1,000-run series took 1.1-1.4 s on the loaded 2-core VM; at 60, 0.64 s)


def shares(
    settings: DetectorSettings, watched: int, combined: int = 0
) -> tuple[DetectorSettings, DetectorSettings]:
    """The settings each of `watched` metrics and each of `combined` combined tests is tested at: the
    check's alpha, `combined_share` of it split over the combined tests, the rest over the metrics
    (Bonferroni); without combined tests the metrics share all of it."""
    share = settings.combined_share if combined else 0.0
    return _split(settings, (1 - share) / max(watched, 1)), _split(settings, share / max(combined, 1))


def per_metric(settings: DetectorSettings, watched: int, combined: int = 0) -> DetectorSettings:
    """The settings each of `watched` metrics is tested at (see `shares`)."""
    return shares(settings, watched, combined)[0]


def _split(settings: DetectorSettings, fraction: float) -> DetectorSettings:
    return dataclasses.replace(
        settings,
        alpha=settings.alpha * fraction,
        suspect_alpha=settings.suspect_alpha * fraction,
        loo_alpha=settings.loo_alpha * fraction,
    )


def decide(
    figures: Mapping[str, Sequence[float]],
    counts: Counts | None,
    settings: DetectorSettings,
    *,
    as_raised: bool = False,
    suspicions: bool = False,
) -> dict[str, list[Change]]:
    """metric -> its changes (as they stand; `as_raised`: every change as a check after each run raised
    it, and with `suspicions` each check's suspected newest run too), each metric and each combined
    test at its share of the check's budget; `counts` feeds the count metrics (never suspected)."""
    start = max(max((len(v) for v in figures.values()), default=0) - SCAN_WINDOW, 0)
    plain = {m: list(v[start:]) for m, v in figures.items() if m not in COUNT_METRICS or counts is None}
    joinable = {m: v for m, v in plain.items() if m not in COUNT_METRICS}
    each, joint_each = shares(settings, len(figures), len(groups(list(joinable))))

    def steps(values: Sequence[float], better_up: bool, at: DetectorSettings) -> list[Change]:
        return _steps(values, better_up, at, as_raised, suspicions)

    joint = joint_changes(joinable, joint_each, steps, as_raised=as_raised)
    out: dict[str, list[Change]] = {}
    for metric in figures:
        if metric in plain:
            own = steps(plain[metric], WATCHED[metric].higher_is_better, each)
            found = merged(own, joint.get(metric, []), as_raised=as_raised, max_after=each.max_after)
        else:
            assert counts is not None
            window = Counts(counts.events[start:], counts.trials[start:])
            found = (count_raised if as_raised else count_changes)(window, each)
        out[metric] = [_shifted(c, start) for c in found]
    return out


def _steps(
    values: Sequence[float],
    better_up: bool,
    each: DetectorSettings,
    as_raised: bool,
    suspicions: bool = False,
) -> list[Change]:
    """The step changes of one series (a metric or a combined one), drift left out."""
    find = (suspected_at if suspicions else raised) if as_raised else detect
    raw = find(values, higher_is_better=better_up, settings=each)
    found = [c for c in raw if not _drift(values, c, better_up, each)]
    if not as_raised and raw and found and found[-1] is not raw[-1]:
        found = []  # the newest change is drift: the steps before it are its staircase
    return found


def _drift(values: Sequence[float], change: Change, better_up: bool, each: DetectorSettings) -> bool:
    """Whether a change the step test raised is the drift of the runs before it (analysis.drift)."""
    worse_up = change.worse != better_up
    return trend_explains(values, change.index, change.detected_at, worse_up=worse_up, alpha=each.alpha)


def drifts(figures: Mapping[str, Sequence[float]], settings: DetectorSettings) -> dict[str, Drift]:
    """metric -> the drift of its newest runs, for the metrics that drift (counts are not checked)."""
    each = per_metric(settings, len(figures))
    out = {}
    for metric, values in figures.items():
        if metric in COUNT_METRICS or not values:
            continue
        better_up = WATCHED[metric].higher_is_better
        found = drift_at(
            values,
            len(values) - 1,
            higher_is_better=better_up,
            alpha=each.alpha,
            min_relative=each.min_relative,
        )
        if found is not None:
            out[metric] = found
    return out


def _shifted(change: Change, by: int) -> Change:
    """`change` with its indexes those of the whole series (the scan saw it from run `by` on)."""
    return dataclasses.replace(change, index=change.index + by, detected_at=change.detected_at + by)
