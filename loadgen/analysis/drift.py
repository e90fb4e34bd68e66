"""Slow drift of one series: a steady slope, told apart from a step (pure functions over plain values).

Over the newest `WINDOW` usable runs (log space), a drift is a monotone trend: Kendall's tau against
the run index, one-sided (`scipy.stats.kendalltau`), p < `alpha`, with the Theil-Sen slope
(`scipy.stats.theilslopes`, robust to outlier runs) moving the series by at least twice
`min_relative` over the window. A step also makes a trend, so a change the step test raised is taken
for drift when the runs before it trend and the runs after it sit where that trend, extrapolated,
puts them (not beyond it at the step test's level): then it is not a step and raises no alarm, and
a real step on top of a drift still stands out from the line and does.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

WINDOW = 20  # runs a drift is measured over
MAX_BEFORE, MIN_BEFORE = 30, 12  # runs before a change that give the trend it is measured against
TREND_ALPHA = 0.01  # the runs before a change trend (a classification of a raised change, no alarm)


@dataclass(frozen=True)
class Drift:
    """A slope over the newest runs: relative change per run, its p-value, whether it is worse."""

    start: int  # index (of the series) of the window's first run
    end: int  # index of its newest run
    slope: float  # relative change per run: 0.005 = +0.5% a run
    p_value: float
    worse: bool

    @property
    def relative(self) -> float:
        """The change the slope makes over the window."""
        return math.expm1(math.log1p(self.slope) * (self.end - self.start))


def _usable(series: Sequence[float]) -> tuple[list[int], np.ndarray]:
    kept = [i for i, v in enumerate(series) if isinstance(v, int | float) and math.isfinite(v) and v > 0]
    return kept, np.log(np.array([float(series[i]) for i in kept]))


def drift_at(
    series: Sequence[float], end: int, *, higher_is_better: bool, alpha: float, min_relative: float
) -> Drift | None:
    """The drift of the WINDOW usable runs up to index `end` (inclusive), either way, or None."""
    kept, logs = _usable(series[: end + 1])
    if len(logs) < WINDOW:
        return None
    y, x = logs[-WINDOW:], np.arange(WINDOW, dtype=float)
    slope = float(stats.theilslopes(y, x).slope)
    up = slope > 0
    if abs(math.expm1(slope * (WINDOW - 1))) < 2 * min_relative:
        return None
    p = float(stats.kendalltau(x, y, alternative="greater" if up else "less").pvalue)
    if not p < alpha:
        return None
    return Drift(kept[-WINDOW], kept[-1], math.expm1(slope), p, up != higher_is_better)


def trend_explains(series: Sequence[float], index: int, end: int, *, worse_up: bool, alpha: float) -> bool:
    """Whether the runs from `index` to `end` are what the trend of the runs before them predicts:
    the runs before (at most MAX_BEFORE, at least MIN_BEFORE: a trend of fewer runs is as often a noise
    spell that would swallow a real step) trend (Kendall's tau, p < TREND_ALPHA),
    and the after runs' mean residual from that line, extrapolated, is not beyond it at `alpha`
    (one-sided t on the line's residual spread). Then the change is drift, not a step; a step on top
    of a drift still stands out from the line."""
    kept, logs = _usable(series[: end + 1])
    positions = np.array(kept, dtype=float)
    before = (positions < index) & (positions >= index - MAX_BEFORE)
    after = positions >= index
    if before.sum() < MIN_BEFORE or not after.any():
        return False
    x, y = positions[before], logs[before]
    if not float(stats.kendalltau(x, y).pvalue) < TREND_ALPHA:
        return False
    slope, intercept = np.polyfit(x, y, 1)
    spread = float(np.std(y - (slope * x + intercept), ddof=2))
    residual = logs[after] - (slope * positions[after] + intercept)
    n = int(after.sum())
    t = float(residual.mean()) / (max(spread, 1e-9) * math.sqrt(1 / n + 1 / len(x)))
    p = float(stats.t.sf(t if worse_up else -t, len(x) - 2))
    return p >= alpha
