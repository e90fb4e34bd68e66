"""The trend of a regime (pure): the line a drifting series' next runs are tested against.

A slow drift (a little worse every night) moves the runs after any candidate split away from the
mean of the runs before it, so a step test against a flat level raises one step after another on
it. When the runs before a split trend, the step test measures the runs after it from the line
instead (`loadgen.analysis.changepoint`):

- the runs before trend when the seasonal Kendall test (Kendall's S against the run index, summed
  over the regimes, so a step between two flat regimes is no trend) is significant, two-sided,
  p < `trend_alpha`, over at least `trend_min` runs (a trend of fewer runs is as often a spell of
  noise); `scipy.stats.kendalltau` has no strata, so the few lines of S and its variance are here
  (ties are not corrected for: the values are continuous);
- the line's slope is a stratified Theil-Sen estimate (the median of the pairwise slopes within each
  regime, as `scipy.stats.theilslopes` takes it over one; the bench's one-sided outlier runs do not
  tilt it), through the newest regime's mean position;
- a run at position x is compared as `y - slope * (x - origin)`: what it reads beyond the line;
- the level the runs after are compared with is the line extrapolated, which is less certain the
  further it is extrapolated: a mean of n runs at distance d from the runs' mean position has the
  variance of a mean of `n_eff = 1 / (1/n + d^2 / Sxx)` runs (the least-squares prediction
  variance, Sxx the sum of squared deviations of the positions), and the t-test counts the level
  as that many runs.

So a drift raises no step, and a step on top of a drift still stands out from the line.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats


@dataclass(frozen=True)
class Trend:
    """A line through a regime's runs: log units per run, through the runs' mean position."""

    slope: float
    origin: float  # the mean position of the runs it was fitted on
    sxx: float  # sum of squared deviations of those positions

    def detrended(self, values: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """What `values` (at `positions`) read beyond the line, as if at its origin."""
        return values - self.slope * (positions - self.origin)

    def effective_runs(self, n: int, positions: np.ndarray) -> float:
        """How many runs the line's level at the mean of `positions` is worth (see the module)."""
        distance = float(np.mean(positions)) - self.origin if len(positions) else 0.0
        return 1.0 / (1.0 / n + distance * distance / self.sxx)


def fit_trend(values: np.ndarray, positions: np.ndarray, regimes: np.ndarray) -> Trend | None:
    """The line of `values` at `positions` within their `regimes` (a label per run; the newest
    regime last): the median of the pairwise slopes within a regime (a stratified Theil-Sen
    estimate), through the newest regime's mean position; None without a pair."""
    pairs = [_pairs(values[regimes == r], positions[regimes == r]) for r in np.unique(regimes)]
    dx = np.concatenate([d for d, _ in pairs]) if pairs else np.empty(0)
    if not len(dx):
        return None
    slope = float(np.median(np.concatenate([d for _, d in pairs]) / dx))
    newest = positions[regimes == regimes[-1]]
    sxx = sum(
        float(np.sum((positions[regimes == r] - positions[regimes == r].mean()) ** 2))
        for r in np.unique(regimes)
    )
    return Trend(slope, float(newest.mean()), sxx) if math.isfinite(slope) and slope != 0 else None


def trends(
    values: np.ndarray, positions: np.ndarray, regimes: np.ndarray, alpha: float, min_runs: int
) -> bool:
    """Whether `values` trend within their `regimes`: the seasonal Kendall test, p < `alpha`, over
    at least `min_runs` runs."""
    if alpha <= 0 or len(values) < max(min_runs, 3):
        return False
    pairs = [_pairs(values[regimes == r], positions[regimes == r]) for r in np.unique(regimes)]
    return _kendall_p(pairs) < alpha


def _pairs(values: np.ndarray, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(dx, dy) of every pair of runs of one regime, later minus earlier."""
    i, j = np.triu_indices(len(values), k=1)
    return positions[j] - positions[i], values[j] - values[i]


def _kendall_p(pairs: list[tuple[np.ndarray, np.ndarray]]) -> float:
    """Two-sided p of the seasonal Kendall test (Hirsch, Slack and Smith 1982): Kendall's S summed
    over the regimes, against the normal with the sum of their variances, continuity-corrected."""
    s = sum(float(np.sum(np.sign(dx) * np.sign(dy))) for dx, dy in pairs)
    var = 0.0
    for dx, _ in pairs:
        n = (1 + math.isqrt(1 + 8 * len(dx))) // 2  # n(n-1)/2 pairs
        var += n * (n - 1) * (2 * n + 5) / 18
    if var <= 0:
        return 1.0
    z = (abs(s) - 1) / math.sqrt(var)
    return float(2 * stats.norm.sf(max(z, 0.0)))
