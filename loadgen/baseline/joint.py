"""The combined tests of a check (pure): changes of the groups of metrics a real step moves together.

Two groups, from what an LLM server does: *prefill* (TTFT p50 and p99: a slower prompt phase) and
*decode* (TPOT and E2E p50 and p99, and throughput: a slower token phase). For each group a check
watches with at least two metrics, the combined series (`loadgen.analysis.combined`: the GLS
estimate of a common step of its metrics, their covariance estimated from the history) is tested
by the same detector as a single metric, at its share of the check's budget
(`loadgen.baseline.decide.shares`). A worse change of a combined series counts when all but one of the
group's metrics (at least two: `agreeing`) read worse by at least `min_relative` between the runs
before and after it: a common step shows on each of them, while noise that the weights happen to
sum up to a change mostly does not (on the bench, 22 of 25 false combined decode changes moved 4 or
fewer of its 5 metrics, 61 of 70 real ones all 5). It is reported on each metric that reads worse
(with the combined test's p-value), unless that metric's own test placed a change within `NEAR` runs
of it already.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from loadgen.analysis.changepoint import Change, DetectorSettings
from loadgen.analysis.combined import REFIT, combined_series, fit_runs, oriented_logs
from loadgen.baseline.metrics import WATCHED

GROUPS: dict[str, tuple[str, ...]] = {
    "prefill": ("ttft_p50", "ttft_p99"),
    "decode": ("tpot_p50", "tpot_p99", "e2e_p50", "e2e_p99", "output_throughput", "request_throughput"),
}
NEAR = 2  # a combined change within this many runs of the metric's own change is the same change
Steps = Callable[[Sequence[float], bool, DetectorSettings], list[Change]]


def groups(metrics: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """The groups with at least two of `metrics`, each as the metrics of it a check watches."""
    out = {}
    for name, members in GROUPS.items():
        watched = tuple(m for m in members if m in metrics)
        if len(watched) >= 2:
            out[name] = watched
    return out


def joint_changes(
    figures: Mapping[str, Sequence[float]], each: DetectorSettings, steps: Steps, *, as_raised: bool = False
) -> dict[str, list[Change]]:
    """metric -> the worse changes the combined tests found on it (`steps` tests one series: the
    detector with its drift filter, as `decide` runs it); `figures` holds the non-count metrics.
    As raised: each change as the check that raised it weighed the metrics (`fit_runs`)."""
    metrics = list(figures)
    found: dict[str, list[Change]] = {m: [] for m in metrics}
    chosen = groups(metrics)
    if not chosen:
        return found
    logs = oriented_logs(figures, {m: WATCHED[m].higher_is_better for m in metrics})
    for members in chosen.values():
        mask = np.array([m in members for m in metrics])
        for fitted, last in _blocks(len(logs), as_raised):
            values = combined_series(logs[:last], mask, fitted)
            previous = 0
            for change in steps(values, False, each):
                if change.worse and (not as_raised or fitted <= change.detected_at + 1 <= last):
                    moved = [
                        (m, c) for m in members if (c := _on_metric(figures[m], m, change, previous, each))
                    ]
                    if len(moved) >= agreeing(len(members)):
                        for metric, on_metric in moved:
                            found[metric].append(on_metric)
                if change.status == "confirmed":
                    previous = change.index
    return found


def agreeing(members: int) -> int:
    """How many of a group's metrics must read worse for its combined change to count: all but one,
    at least two (a common step shows on each; noise that the weights sum up to a change rarely does)."""
    return max(2, members - 1)


def _blocks(n: int, as_raised: bool) -> list[tuple[int, int]]:
    """(runs the weights are fitted on, the last check using them): every block of checks when as
    raised, the newest check otherwise."""
    if not as_raised:
        return [(fit_runs(n), n)]
    return [(fitted, min(fitted + REFIT - 1, n)) for fitted in range(REFIT, n + 1, REFIT)]


def _on_metric(
    values: Sequence[float], metric: str, change: Change, since: int, each: DetectorSettings
) -> Change | None:
    """The combined change as a change of `metric`: its medians before (since the previous combined
    change, at most max_before runs) and after; None unless it reads worse by min_relative."""
    before = _usable(values[max(since, change.index - each.max_before) : change.index])
    after = _usable(values[change.index : change.detected_at + 1])
    if not len(before) or not len(after):
        return None
    b, a = float(np.median(before)), float(np.median(after))
    relative = a / b - 1
    worse = -relative if WATCHED[metric].higher_is_better else relative
    if worse < each.min_relative:
        return None
    return Change(change.index, change.detected_at, b, a, change.p_value, True, change.status)


def _usable(values: Sequence[float]) -> np.ndarray:
    array = np.array(values, dtype=float)
    return array[np.isfinite(array) & (array > 0)]


def merged(own: list[Change], joint: list[Change], *, as_raised: bool, max_after: int = 6) -> list[Change]:
    """A metric's own changes and the combined ones not already among them (within NEAR runs): in
    the order raised (`as_raised`, the earliest raising kept) or by index (as they stand). A suspected
    newest run is dropped when a confirmed change (either test's) placed within `max_after` runs of it
    was known by then: its own test compares it with the level before that change, which is stale."""
    kept = list(own)
    for change in sorted(joint, key=lambda c: c.detected_at):
        same = [c for c in kept if abs(c.index - change.index) <= NEAR and c.status == change.status]
        if not same or (as_raised and all(c.detected_at > change.detected_at for c in same)):
            kept.append(change)
    kept = [c for c in kept if c.status != "suspected" or not _covered(c, kept, max_after)]
    return sorted(kept, key=(lambda c: c.detected_at) if as_raised else (lambda c: c.index))


def _covered(suspect: Change, changes: list[Change], max_after: int) -> bool:
    """Whether a confirmed change among `changes`, known at the suspicion's check, lies within
    max_after runs before its newest run (as `changepoint.detect` covers its own suspicions)."""
    return any(
        c.status == "confirmed"
        and c.detected_at <= suspect.detected_at
        and c.index >= suspect.detected_at + 1 - max_after
        for c in changes
    )
