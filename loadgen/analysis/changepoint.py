"""Change points in one series of runs: persistent shifts, significant against the series' own noise.

A series is one metric of one baseline series (say TPOT p99 of `llama-8b/c32` on 1x H200), oldest run
first. The check is *sequential*, the way a schedule uses it: after each run it asks whether the runs
since some recent index `i` differ from the runs of the current regime before `i`, and a confirmed
change starts a new regime. So checking a whole stored history gives the changes an online check would
have raised, at the run it would have raised them (`Change.detected_at`).

The test, in log space (shifts are relative), for each candidate `i` among the last `max_after` runs:
- the regime before `i` (at most `max_before` runs) gives the level: runs further than `regime.OUTLIER`
  normal-consistent MADs (`regime.normal_mad`, scipy's `median_abs_deviation` to the bit) from its
  median are left out, the mean of the rest is the level, and their standard deviation the noise.
  The noise is the series', not the regime's: after a change, the residuals of the earlier regime(s)
  are pooled with the new one's, so a new regime needs only `min_regime` runs (not `min_before`)
  before the next change can be placed (a false change no longer blinds the check for `min_before`
  runs, and the noise of a short regime is not guessed from a handful of runs);
- runs after `i` are clipped to the level +- `clip_after` noise units, so one wild run moves the mean
  by a bounded amount, and compared with the level by a one-sided pooled two-sample t-test
  (`scipy.stats.ttest_ind_from_stats`), in the direction asked: p < `alpha` for worse, and
  p < `improvement_alpha` (stricter) for better: an improvement is never alarmed on, but a false one
  would restart the regime just before a real regression and hide it;
- without the most extreme run after `i`, the same test must still give p < `loo_alpha` and the
  median of the rest must sit at least `min_shift` noise units beyond the level: a single outlier,
  however large, is not a change, nor does one run at a new level carry earlier ones;
- the first run after `i` must read at least half that shift beyond the level: a change on the
  last few runs is not placed a run early, carrying one run of the old level in front of them;
- when the newest runs trend within their regimes (a drift), the runs after `i` are read off the
  line of the runs before it rather than a flat level (`loadgen.analysis.trend`), so a drift is no
  staircase of steps and a step on top of it still stands out;
- a change needs at least `min_after` runs after it (default 3): the newest run alone that looks worse
  is only *suspected* (a re-run settles it), and becomes *confirmed* when the next runs agree.
The candidate with the smallest p-value passing all three is where the change is placed: the first run
of the new level.

A change is *revised* while the regime after it is young (fewer than `revise_within` runs): when no
candidate passes against that young regime, the candidates after the change are also tested against
the regime before it, and one that passes there replaces the change (which was placed early, next to a
run that read high, or was no change at all, and would otherwise leave the next change to be measured
against a level of one to four runs). `detect` gives the changes as they stand; `raised` gives every
change as a schedule saw it raised, a revised one included. The defaults are the ones `make bench`
(bench/baseline_check.py) measures against seeded synthetic histories, naive rules and Apache Otava.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from loadgen.analysis.regime import Regime, segment_row, t_test


@dataclass(frozen=True)
class DetectorSettings:
    """Knobs of the check; the defaults are the ones `make bench` measures."""

    alpha: float = 0.003  # one-sided p-value a confirmed regression must beat: the budget of a check,
    # split over its combined tests and watched metrics (loadgen.baseline.decide)
    combined_share: float = 0.8  # share of alpha spent on the combined tests of the metrics a step
    # moves together (loadgen.baseline.joint); the rest is split over the single metrics
    improvement_alpha: float = 0.001  # and an improvement (not alarmed; a false one restarts the regime)
    suspect_alpha: float = 0.001  # p-value of the newest run alone, for a suspected change
    min_before: int = 6  # runs of the first regime needed before a change can be placed
    min_regime: int = 4  # runs of a later regime (its noise pooled with the earlier ones') needed
    max_before: int = 30  # at most this many runs before a candidate are compared
    min_after: int = 3  # runs after a change needed to confirm it
    max_after: int = 6  # candidates lie at most this many runs back from the newest
    min_relative: float = 0.01  # smaller shifts (|after/before - 1|) are not reported
    loo_alpha: float = 0.025  # without its most extreme run, the rest must still differ at this level
    min_shift: float = 1.2  # median after vs the level before, in noise units, at least
    noise_floor: float = 0.002  # smallest noise (relative) assumed, for near-constant series
    clip_after: float = 4.0  # runs after a candidate move the comparison by at most this many noise
    # units each (3 cut a 10% step at CV 2.5%, 4 units a run, down to 3: half the bench's 10% misses)
    revise_within: int = 7  # runs after a change during which a later one found against the regime
    # before it replaces it (0: never revised)
    trend_alpha: float = 0.01  # the newest max_before runs up to a check that trend within their
    # regimes (seasonal Kendall, two-sided) at this level are tested against the line of the runs
    # before each candidate, not a flat level, when it rises towards the side tested
    # (loadgen.analysis.trend; 0: never)
    trend_min: int = 10  # runs of the regime before a candidate needed for it to be read off a line
    confirm_runs: int = 2  # a scheduled pass re-runs a series with a suspected regression (or a
    # noisy newest run) up to this many times at once (loadgen.baseline.cycle; 0: never); 2 measured
    # by bench/confirm_runs.py (fewer false alarms, 0.4 passes earlier, 4 runs more per 100 passes)
    # what makes a run noisy, kept out of a baseline check (loadgen.baseline.noisy; 0: not checked)
    max_lag_s: float = 0.5  # schedule lag p99 (send - due time) of the run
    max_steal: float = 0.10  # share of CPU time stolen from the client host during the run
    max_load_per_cpu: float = 0.0  # 1-minute load average per CPU of the client host (off: shared
    # hosts run loaded; a dedicated benchmark host sets, say, 1.5)


@dataclass(frozen=True)
class Change:
    """A shift of one series: `index` is the first run at the new level."""

    index: int
    detected_at: int  # index of the newest run when it was raised
    before_median: float
    after_median: float
    p_value: float
    worse: bool
    status: str  # "confirmed" | "suspected"

    @property
    def relative(self) -> float:
        """after / before - 1 (medians)."""
        return self.after_median / self.before_median - 1 if self.before_median else math.inf


def _p_values(
    regime: Regime, splits: list[int], end: int, worse_up: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per split: the p-value that logs[split:end] sit on the worse side of the level before it, the
    same without the most extreme run after the split (1.0 when only one run is after it), and the
    shift of the rest's median in noise units."""
    rows, loo_rows, has_loo, shifts = [], [], [], []
    clip = regime.settings.clip_after
    for split in splits:
        level, (after, positions) = regime.level(split, worse_up, end), regime.after(split, end, worse_up)
        rows.append(segment_row(level, after, positions, clip))
        extreme = int(np.argmax(after) if worse_up else np.argmin(after))
        rest, rest_at = np.delete(after, extreme), np.delete(positions, extreme)
        rest, rest_at = (rest, rest_at) if len(rest) else (after, positions)
        shift = (float(np.median(rest)) - level.center) / level.scale
        shifts.append(shift if worse_up else -shift)
        has_loo.append(len(after) > 1)
        loo_rows.append(segment_row(level, rest, rest_at, clip))
    p_loo = np.where(has_loo, t_test(loo_rows, worse_up), 1.0)
    return t_test(rows, worse_up), p_loo, np.array(shifts)


def _first_moved(
    regime: Regime, splits: list[int], end: int, shift: np.ndarray, worse_up: bool
) -> np.ndarray:
    """Per split: its first run reads at least half the shift beyond the level (in noise units), so
    the runs after it that make the change do not carry a run of the old level in front of them."""
    first = []
    for split in splits:
        level = regime.level(split, worse_up, end)
        moved = (float(regime.after(split, end, worse_up)[0][0]) - level.center) / level.scale
        first.append(moved if worse_up else -moved)
    return np.array(first) >= 0.5 * shift


def _best_split(regime: Regime, end: int, worse_up: bool, alpha: float) -> tuple[int, float] | None:
    """(index, p) of the most significant candidate in the regime up to `end` (p < alpha), or None."""
    s = regime.settings
    splits = list(range(max(regime.start + regime.need, end - s.max_after), end - s.min_after + 1))
    if not splits:
        return None
    p, p_loo, shift = _p_values(regime, splits, end, worse_up)
    ok = (
        (p < alpha)
        & (p_loo < s.loo_alpha)
        & (shift >= s.min_shift)
        & _first_moved(regime, splits, end, shift, worse_up)
    )
    if not ok.any():
        return None
    best = int(np.argmin(np.where(ok, p, np.inf)))
    return splits[best], float(p[best])


def _change(
    values: np.ndarray, start: int, index: int, end: int, p: float, worse: bool, status: str, max_before: int
) -> Change:
    before = values[max(start, index - max_before) : index]
    return Change(
        index=index,
        detected_at=end - 1,
        before_median=float(np.median(before)),
        after_median=float(np.median(values[index:end])),
        p_value=p,
        worse=worse,
        status=status,
    )


@dataclass
class _Scan:
    """What a scan found: the changes as they stand, every change as it was raised, the last regime."""

    changes: list[Change]
    raised: list[Change]
    regime: Regime
    suspected: list[Change] = field(default_factory=list)  # the newest run suspected, check by check


def _revisable(regime: Regime, previous: Regime | None, end: int) -> Regime | None:
    """The regime before the latest change while the one after it is younger than `revise_within`."""
    young = end - regime.start < regime.settings.revise_within
    return previous if previous is not None and young else None


def _scan(
    values: np.ndarray, higher_is_better: bool, settings: DetectorSettings, *, suspicions: bool = False
) -> _Scan:
    """Confirmed changes checking after each run (a young change revised, see the module's text);
    with `suspicions`, also each check's suspected newest run."""
    regime, previous = Regime(np.log(values), settings), None
    changes: list[Change] = []
    raised: list[Change] = []
    suspected: list[Change] = []
    for end in range(settings.min_before + settings.min_after, len(values) + 1):
        for worse in (True, False):
            worse_up = worse != higher_is_better  # latency: worse is up; throughput: worse is down
            alpha = settings.alpha if worse else settings.improvement_alpha
            base, found = regime, _best_split(regime, end, worse_up, alpha)
            earlier = _revisable(regime, previous, end) if found is None else None
            if earlier is not None:
                found = _best_split(earlier, end, worse_up, alpha)
                if found is None or found[0] <= changes[-1].index:
                    continue
                base = earlier
            if found is None:
                continue
            change = _change(
                values, base.start, found[0], end, found[1], worse, "confirmed", settings.max_before
            )
            if abs(change.relative) < settings.min_relative:
                continue
            if base is not regime:  # the latest change is replaced: the scan resumes from before it
                changes.pop()
            changes.append(change)
            raised.append(change)
            previous, regime = copy.copy(base), base
            regime.restart(found[0])  # rebinds the regime's fields: `previous` keeps the earlier ones
            break
        if suspicions:
            suspected += _suspicion(values, regime, changes, end, higher_is_better)
    return _Scan(changes, raised, regime, suspected)


def _suspicion(
    values: np.ndarray, regime: Regime, changes: list[Change], end: int, higher_is_better: bool
) -> list[Change]:
    """What `detect` would add as suspected after run `end` (after that check's confirmations)."""
    covered = bool(changes) and changes[-1].index >= end - regime.settings.max_after
    found = None if covered else _suspected(values, regime, higher_is_better, end)
    return [found] if found is not None else []


def _suspected(
    values: np.ndarray, regime: Regime, higher_is_better: bool, end: int | None = None
) -> Change | None:
    """The newest runs (of the first `end`), fewer than `min_after`, on the worse side of the level
    before them (p < suspect_alpha), or None. Each block of the newest 1 .. min_after - 1 runs is
    tested against the level before it, and the smallest p-value, times the blocks tested
    (Bonferroni), decides: a step two runs old is suspected too, not only one a run old (the level
    before the newest run alone would carry the step's first run and hide it)."""
    s = regime.settings
    end = len(values) if end is None else end
    worse_up = not higher_is_better
    blocks = [k for k in range(1, max(1, s.min_after - 1) + 1) if end - k - regime.start >= regime.need]
    if not blocks:
        return None
    rows = [
        segment_row(regime.level(end - k, worse_up, end), *regime.after(end - k, end, worse_up), np.inf)
        for k in blocks
    ]
    p_values = t_test(rows, worse_up)
    best = int(np.argmin(p_values))
    p = min(1.0, float(p_values[best]) * len(blocks))
    change = _change(values, regime.start, end - blocks[best], end, p, True, "suspected", s.max_before)
    return change if p < s.suspect_alpha and abs(change.relative) >= s.min_relative else None


def _usable(series: Sequence[float]) -> tuple[list[int], np.ndarray]:
    """The indexes of the usable values and those values: non-positive or non-finite ones (a failed
    run's missing figure) are left out of the test."""
    kept = [i for i, v in enumerate(series) if isinstance(v, int | float) and math.isfinite(v) and v > 0]
    return kept, np.array([float(series[i]) for i in kept])


def detect(
    series: Sequence[float], *, higher_is_better: bool, settings: DetectorSettings | None = None
) -> list[Change]:
    """Every confirmed change in `series` (oldest first), then a suspected one at the newest run.

    Non-positive or non-finite values (a failed run's missing figure) are left out of the test; the
    indexes returned are those of `series`. A lone better run is not worth a suspicion.
    """
    settings = settings or DetectorSettings()
    kept, values = _usable(series)
    scan = _scan(values, higher_is_better, settings)
    changes = scan.changes
    covered = bool(changes) and changes[-1].index >= len(values) - settings.max_after
    suspect = None if covered else _suspected(values, scan.regime, higher_is_better)
    return [_reindex(c, kept) for c in [*changes, *([suspect] if suspect else [])]]


def raised(
    series: Sequence[float], *, higher_is_better: bool, settings: DetectorSettings | None = None
) -> list[Change]:
    """Every confirmed change in the order a check after each run raised it, those later revised
    included (what a schedule alarmed on; `detect` gives the changes as they stand)."""
    settings = settings or DetectorSettings()
    kept, values = _usable(series)
    return [_reindex(c, kept) for c in _scan(values, higher_is_better, settings).raised]


def suspected_at(
    series: Sequence[float], *, higher_is_better: bool, settings: DetectorSettings | None = None
) -> list[Change]:
    """Every confirmed change as raised (`raised`) and, check by check, the newest run when `detect`
    would have called it suspected, ordered by the check (`detected_at`): what a scheduler that
    re-runs a suspected series sees after each run."""
    settings = settings or DetectorSettings()
    kept, values = _usable(series)
    scan = _scan(values, higher_is_better, settings, suspicions=True)
    found = sorted([*scan.raised, *scan.suspected], key=lambda c: c.detected_at)
    return [_reindex(c, kept) for c in found]


def _reindex(change: Change, kept: list[int]) -> Change:
    return Change(
        index=kept[change.index],
        detected_at=kept[change.detected_at],
        before_median=change.before_median,
        after_median=change.after_median,
        p_value=change.p_value,
        worse=change.worse,
        status=change.status,
    )
