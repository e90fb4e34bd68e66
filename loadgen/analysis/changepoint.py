"""Change points in one series of runs: persistent shifts, significant against the series' own noise.

A series is one metric of one baseline series (say TPOT p99 of `llama-8b/c32` on 1x H200), oldest run
first. The check is *sequential*, the way a schedule uses it: after each run it asks whether the runs
since some recent index `i` differ from the runs of the current regime before `i`, and a confirmed
change starts a new regime. So checking a whole stored history gives the changes an online check would
have raised, at the run it would have raised them (`Change.detected_at`).

The test, in log space (shifts are relative), for each candidate `i` among the last `max_after` runs:
- the regime before `i` is summarised robustly: median, and the normal-consistent median absolute
  deviation (`scipy.stats.median_abs_deviation(scale="normal")`) as its noise;
- runs before `i` are clipped to median +- 3 noise units, runs after it to +- 5, so one wild run moves
  a mean by a bounded amount;
- the runs after `i` are compared with those before by a one-sided pooled two-sample t-test
  (`scipy.stats.ttest_ind_from_stats`), in the direction asked (worse, or better): p < `alpha`;
- without the most extreme run after `i`, the same test must still give p < `loo_alpha` and the
  median of the rest must sit at least `min_shift` noise units beyond the median before: a single
  outlier, however large, is not a change, nor does one run at a new level carry earlier ones;
- a change needs at least `min_after` runs after it (default 2): the newest run alone that looks worse
  is only *suspected* (a re-run settles it), and becomes *confirmed* when the next run agrees.
The candidate with the smallest p-value passing all three is where the change is placed: the first run
of the new level. The defaults are the ones `make bench` (bench/baseline_check.py) measures against
seeded synthetic histories, naive rules and Apache Otava.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

CLIP_BEFORE = 3.0  # the regime before a candidate is clipped to median +- this many noise units
CLIP_AFTER = 5.0  # runs after it move the comparison by at most this many noise units each


@dataclass(frozen=True)
class DetectorSettings:
    """Knobs of the check; the defaults are the ones `make bench` measures."""

    alpha: float = 0.003  # one-sided p-value a confirmed change must beat
    suspect_alpha: float = 0.001  # p-value of the newest run alone, for a suspected change
    min_before: int = 8  # runs of the current regime needed before a change can be placed
    max_before: int = 30  # at most this many runs before a candidate are compared
    min_after: int = 2  # runs after a change needed to confirm it
    max_after: int = 6  # candidates lie at most this many runs back from the newest
    min_relative: float = 0.01  # smaller shifts (|after/before - 1|) are not reported
    loo_alpha: float = 0.05  # without its most extreme run, the rest must still differ at this level
    min_shift: float = 1.5  # median after vs median before, in noise units, at least
    noise_floor: float = 0.002  # smallest noise (relative) assumed, for near-constant series


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


def _segment_stats(
    before: np.ndarray, after: np.ndarray, floor: float, clip_after: float = CLIP_AFTER
) -> tuple[float, ...]:
    """(mean, std, n) of the clipped after- and before-segments (log values)."""
    center = float(np.median(before))
    scale = max(float(stats.median_abs_deviation(before, scale="normal")), floor)
    b = np.clip(before, center - CLIP_BEFORE * scale, center + CLIP_BEFORE * scale)
    a = np.clip(after, center - clip_after * scale, center + clip_after * scale)
    std_a = float(np.std(a, ddof=1)) if len(a) > 1 else 0.0
    return float(a.mean()), std_a, len(a), float(b.mean()), float(np.std(b, ddof=1)), len(b)


def _t_test(rows: list[tuple[float, ...]], worse_up: bool) -> np.ndarray:
    """One-sided pooled two-sample t-test p-values (scipy), one per row of segment stats."""
    m_a, s_a, n_a, m_b, s_b, n_b = (np.array(col) for col in zip(*rows, strict=True))
    with np.errstate(divide="ignore", invalid="ignore"):
        result = stats.ttest_ind_from_stats(
            m_a, s_a, n_a, m_b, s_b, n_b, equal_var=True, alternative="greater" if worse_up else "less"
        )
    p = np.asarray(result.pvalue, dtype=float)
    return np.where(np.isfinite(p), p, 1.0)


def _p_values(
    logs: np.ndarray, starts: list[int], splits: list[int], end: int, worse_up: bool, floor: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per split: the p-value that logs[split:end] sit on the worse side of logs[start:split], and the
    same without the most extreme run after the split (1.0 when only one run is after it)."""
    rows, loo_rows, has_loo, shifts = [], [], [], []
    for start, split in zip(starts, splits, strict=True):
        before, after = logs[start:split], logs[split:end]
        rows.append(_segment_stats(before, after, floor))
        rest = np.delete(after, int(np.argmax(after) if worse_up else np.argmin(after)))
        scale = max(float(stats.median_abs_deviation(before, scale="normal")), floor)
        shift = (float(np.median(rest if len(rest) else after)) - float(np.median(before))) / scale
        shifts.append(shift if worse_up else -shift)
        has_loo.append(len(rest) > 0)
        loo_rows.append(_segment_stats(before, rest if len(rest) else after, floor))
    p_loo = np.where(has_loo, _t_test(loo_rows, worse_up), 1.0)
    return _t_test(rows, worse_up), p_loo, np.array(shifts)


def _best_split(
    logs: np.ndarray, start: int, end: int, worse_up: bool, settings: DetectorSettings, min_after: int
) -> tuple[int, float] | None:
    """(index, p) of the most significant candidate in the regime [start, end), or None."""
    splits = list(range(max(start + settings.min_before, end - settings.max_after), end - min_after + 1))
    if not splits:
        return None
    starts = [max(start, split - settings.max_before) for split in splits]
    p, p_loo, shift = _p_values(logs, starts, splits, end, worse_up, settings.noise_floor)
    ok = (p < settings.alpha) & (p_loo < settings.loo_alpha) & (shift >= settings.min_shift)
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


def _scan(
    values: np.ndarray, higher_is_better: bool, settings: DetectorSettings, upto: int, start: int
) -> tuple[list[Change], int]:
    """Confirmed changes checking after each run up to `upto`; (changes, start of the last regime)."""
    logs = np.log(values)
    changes: list[Change] = []
    for end in range(start + settings.min_before + settings.min_after, upto + 1):
        for worse in (True, False):
            worse_up = worse != higher_is_better  # latency: worse is up; throughput: worse is down
            found = _best_split(logs, start, end, worse_up, settings, settings.min_after)
            if found is None:
                continue
            change = _change(values, start, found[0], end, found[1], worse, "confirmed", settings.max_before)
            if abs(change.relative) < settings.min_relative:
                continue
            changes.append(change)
            start = found[0]
            break
    return changes, start


def detect(
    series: Sequence[float], *, higher_is_better: bool, settings: DetectorSettings | None = None
) -> list[Change]:
    """Every confirmed change in `series` (oldest first), then a suspected one at the newest run.

    Non-positive or non-finite values (a failed run's missing figure) are left out of the test; the
    indexes returned are those of `series`.
    """
    settings = settings or DetectorSettings()
    kept = [i for i, v in enumerate(series) if isinstance(v, int | float) and math.isfinite(v) and v > 0]
    values = np.array([float(series[i]) for i in kept])
    changes, start = _scan(values, higher_is_better, settings, len(values), 0)
    end = len(values)
    covered = bool(changes) and changes[-1].index >= end - settings.max_after
    if not covered and end - start > settings.min_before:
        logs = np.log(values)
        for worse in (True, False):
            if not worse:
                continue  # a lone better run is not worth a suspicion
            worse_up = worse != higher_is_better
            before = logs[max(start, end - 1 - settings.max_before) : end - 1]
            row = _segment_stats(before, logs[end - 1 :], settings.noise_floor, clip_after=np.inf)
            p = float(_t_test([row], worse_up)[0])
            change = _change(values, start, end - 1, end, p, worse, "suspected", settings.max_before)
            if p < settings.suspect_alpha and abs(change.relative) >= settings.min_relative:
                changes.append(change)
    return [_reindex(c, kept) for c in changes]


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
