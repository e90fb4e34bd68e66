"""The regime of a change-point scan (pure): its level, its noise, and the line a drifting regime is
read against (`loadgen.analysis.changepoint` scans with it; the method is in that module's text).

`regime_level` gives a regime's level and the series' noise (outliers beyond `OUTLIER` MADs left out);
`Regime` keeps the current regime's start, the earlier regimes' residuals and, when the newest runs
drift (`loadgen.analysis.trend`), the line its candidates are read off; `segment_row` and `t_test` are
the one-sided pooled two-sample t-test of the runs after a candidate against that level.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from scipy import stats

from loadgen.analysis.trend import Trend, fit_trend, trends

if TYPE_CHECKING:
    from loadgen.analysis.changepoint import DetectorSettings

OUTLIER = 4.0  # runs further than this many MADs from the regime's median are left out of its level


@dataclass(frozen=True)
class Level:
    """The regime before a candidate (log values): its level, the series' noise, runs averaged."""

    center: float
    scale: float
    n: int
    trend: Trend | None = None  # the runs before trend: values are read beyond this line

    def beyond(self, values: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """`values` (log, at `positions`) as the level reads them: beyond its trend, if any."""
        return values if self.trend is None else self.trend.detrended(values, positions)

    def runs_for(self, positions: np.ndarray) -> float:
        """How many runs the level is worth against runs at `positions` (fewer when extrapolated)."""
        return self.n if self.trend is None else self.trend.effective_runs(self.n, positions)


NORMAL_MAD = 0.6744897501960817  # scipy.special.ndtri(0.75): the MAD of a unit normal


def normal_mad(values: np.ndarray) -> float:
    """`scipy.stats.median_abs_deviation(values, scale="normal")` for a 1-D array, the same arithmetic
    (the median of |x - median| over ndtri(0.75)) without scipy's argument handling, which was 40% of
    a whole check's time (0.7 ms a call)."""
    return float(np.median(np.abs(values - np.median(values)))) / NORMAL_MAD


def regime_level(before: np.ndarray, prior: np.ndarray, floor: float) -> Level:
    """Level of `before`: the mean of its runs within OUTLIER MADs of its median; noise: the standard
    deviation of the residuals kept, `before`'s (about its median) pooled with the earlier regimes'
    `prior` ones."""
    median = float(np.median(before))
    residuals = np.concatenate([prior, before - median])
    mad = max(normal_mad(residuals), floor)
    kept = residuals[np.abs(residuals) <= OUTLIER * mad]
    scale = max(float(np.std(kept, ddof=1)), floor) if len(kept) > 1 else mad
    level = before[np.abs(before - median) <= OUTLIER * mad]
    level = level if len(level) else before
    return Level(float(level.mean()), scale, len(level))


def segment_row(
    level: Level, after: np.ndarray, positions: np.ndarray, clip_after: float
) -> tuple[float, ...]:
    """(mean, std, n) of the clipped runs after a candidate (already read beyond the level's trend,
    at `positions`), then (center, scale, runs it is worth) of the level."""
    a = np.clip(after, level.center - clip_after * level.scale, level.center + clip_after * level.scale)
    std_a = float(np.std(a, ddof=1)) if len(a) > 1 else 0.0
    return float(a.mean()), std_a, len(a), level.center, level.scale, level.runs_for(positions)


def t_test(rows: list[tuple[float, ...]], worse_up: bool) -> np.ndarray:
    """One-sided pooled two-sample t-test p-values (scipy), one per row of segment stats."""
    m_a, s_a, n_a, m_b, s_b, n_b = (np.array(col) for col in zip(*rows, strict=True))
    with np.errstate(divide="ignore", invalid="ignore"):
        result = stats.ttest_ind_from_stats(
            m_a, s_a, n_a, m_b, s_b, n_b, equal_var=True, alternative="greater" if worse_up else "less"
        )
    p = np.asarray(result.pvalue, dtype=float)
    return np.where(np.isfinite(p), p, 1.0)


@dataclass
class Regime:
    """The current regime of a scan: where it starts, the earlier regimes' residuals, levels so far."""

    logs: np.ndarray
    settings: DetectorSettings
    start: int = 0
    prior: np.ndarray = field(default_factory=lambda: np.empty(0))
    levels: dict[tuple[int, bool], Level] = field(default_factory=dict)
    lines: dict[int, Trend | None] = field(default_factory=dict)
    trending: dict[int, bool] = field(default_factory=dict)
    starts: tuple[int, ...] = (0,)  # the first run of each regime so far, this one last

    @property
    def need(self) -> int:
        """Runs of this regime needed before a change: fewer once the noise is known from earlier ones."""
        s = self.settings
        return s.min_regime if len(self.prior) >= s.min_before else s.min_before

    def level(self, split: int, up: bool | None = None, end: int | None = None) -> Level:
        """The level of the (at most max_before) runs of this regime before `split` (cached): the line
        through them (loadgen.analysis.trend) when the runs up to `end` trend and that line rises
        towards `up` (with `up` None: either way), else a flat one. A line falling away from the
        side tested is not used: it would make a change on that side look larger."""
        trend = self._line(split) if self._drifts(split, end) else None
        if trend is not None and up is not None and (trend.slope > 0) != up:
            trend = None
        key = (split, trend is not None)
        if key not in self.levels:
            s = self.settings
            lo = max(self.start, split - s.max_before)
            before, positions = self.logs[lo:split], np.arange(lo, split, dtype=float)
            if trend is None:
                self.levels[key] = regime_level(before, self.prior, s.noise_floor)
            else:
                flat = regime_level(trend.detrended(before, positions), self.prior, s.noise_floor)
                self.levels[key] = dataclasses.replace(flat, trend=trend)
        return self.levels[key]

    def _window(self, end: int) -> tuple[np.ndarray, np.ndarray]:
        """The newest max_before runs before `end` and the regime each belongs to."""
        span = np.arange(max(0, end - self.settings.max_before), end)
        return span, np.searchsorted(np.array(self.starts), span, side="right")

    def _line(self, split: int) -> Trend | None:
        """The line of the runs before `split`, within their regimes (cached)."""
        if split not in self.lines:
            span, regimes = self._window(split)
            self.lines[split] = fit_trend(self.logs[span], span.astype(float), regimes)
        return self.lines[split]

    def _drifts(self, split: int, end: int | None) -> bool:
        """Whether the runs up to `end` trend within their regimes, and the regime has `trend_min`
        runs before `split` (cached; with `end` None: whenever there is a line)."""
        if end is None:
            return True
        if end not in self.trending:
            s, (span, regimes) = self.settings, self._window(end)
            self.trending[end] = trends(self.logs[span], span.astype(float), regimes, s.trend_alpha, 3)
        return self.trending[end] and split - self.start >= self.settings.trend_min > 0

    def after(self, split: int, end: int, up: bool) -> tuple[np.ndarray, np.ndarray]:
        """The runs from `split` to `end` as the level before `split` (`level(split, up, end)`) reads
        them, and their positions."""
        positions = np.arange(split, end, dtype=float)
        return self.level(split, up, end).beyond(self.logs[split:end], positions), positions

    def restart(self, at: int) -> None:
        """A change at `at`: its runs' residuals (about the trend, if any) join the noise, and a new
        regime begins."""
        lo = max(self.start, at - self.settings.max_before)
        old = self.level(at, None, at).beyond(self.logs[lo:at], np.arange(lo, at, dtype=float))
        self.prior = np.concatenate([self.prior, old - np.median(old)])[-self.settings.max_before :]
        self.start, self.levels, self.lines, self.trending = at, {}, {}, {}
        self.starts = (*self.starts, at)
