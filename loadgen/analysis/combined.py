"""Combined series of correlated metrics (pure): one series per group of metrics a change moves together.

A real step rarely moves one metric: a slower decode raises TPOT and E2E (p50 and p99) and lowers
throughput, a slower prefill raises TTFT p50 and p99. Testing each metric at its Bonferroni share
of the budget throws that away. A *combined series* is one value per run: the generalised-least-
squares (GLS) estimate of a common step of the group's metrics, in log space, oriented so that up is
worse (throughput enters negated):

    c_t = sum_j w_j * o_jt,   w = S^-1 d / (d' S^-1 d)

where o_jt is the oriented log value of metric j at run t, d the group's indicator (1 on its
metrics, 0 on the others) and S the metrics' covariance. `w` is the minimum-variance unbiased
weighting of a step of size s on the group's metrics (c moves by exactly s): the metrics outside
the group get negative weights, which take out the noise every metric shares (a slow night on the
host), and the noisier p99s get less weight than the p50s. With the bench's correlation (0.36
between any two metrics) a step on the five decode metrics stands 1.8 times as many noise units out
of the combined series as out of one metric, a TTFT step 1.5 times.

S is estimated from the history itself, robust to the steps and outliers in it: first differences of
consecutive runs (a level shift touches one difference only), each metric's differences winsorised
at `CLIP` normal-consistent MADs. S has one factor: each metric's own noise (the standard deviation
of its differences over sqrt 2: the difference of two independent runs has twice a run's variance)
and one correlation shared by every pair (the mean of the pairwise ones, in [0, `MAX_RHO`]): m + 1
figures instead of m(m+1)/2, because weights fitted on a handful of runs with a full covariance fit
that handful's noise (the combined series then reads quieter on those runs than on the next, and
false alarms follow).

A check sees only the runs before it, so the weights are refitted every `REFIT` runs from the runs
so far: the check after run `end` weighs with the covariance of the first `REFIT * (end // REFIT)`
runs (`fit_runs`). The same rule for a stored history and for the bench's check after every run
makes the bench measure what a scheduled check decides, with no look-ahead.

The combined series is then tested by the same detector as any metric
(`loadgen.analysis.changepoint`): its level, noise and outlier handling are its own, measured on
its own values, so a poorly estimated S costs power, never the false-alarm rate. Runs where a
metric of the group is missing have no combined value (NaN).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
from scipy import stats

CLIP = 4.0  # differences further than this many MADs from their median are winsorised
MAX_RHO = 0.9  # the shared correlation is taken at most this high
NOISE_FLOOR = 0.002  # smallest noise (relative) assumed per metric, as the detector's noise_floor
REFIT = 8  # the weights are refitted every this many runs
MIN_RUNS = 6  # fewer usable runs: no combined series (NaN throughout)


def fit_runs(end: int) -> int:
    """How many of the first runs the weights of the check after run `end` are fitted on."""
    return REFIT * (end // REFIT)


def oriented_logs(figures: Mapping[str, Sequence[float]], higher_is_better: Mapping[str, bool]) -> np.ndarray:
    """runs x metrics: log values, negated where higher is better (up is worse); NaN where unusable."""
    columns = []
    for metric, values in figures.items():
        raw = np.array([v if isinstance(v, int | float) else math.nan for v in values], dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            logs = np.where(np.isfinite(raw) & (raw > 0), np.log(raw), math.nan)
        columns.append(-logs if higher_is_better[metric] else logs)
    return np.column_stack(columns) if columns else np.empty((0, 0))


def covariance(logs: np.ndarray) -> np.ndarray | None:
    """Robust one-factor covariance of the metrics' run noise (see the module's text); None when too
    few complete runs."""
    complete = logs[np.all(np.isfinite(logs), axis=1)]
    if len(complete) < MIN_RUNS:
        return None
    diffs = np.diff(complete, axis=0)
    center = np.median(diffs, axis=0)
    mad = np.maximum(stats.median_abs_deviation(diffs, axis=0, scale="normal"), NOISE_FLOOR)
    clipped = np.clip(diffs, center - CLIP * mad, center + CLIP * mad)
    sd = np.maximum(np.std(clipped, axis=0, ddof=1), NOISE_FLOOR) / math.sqrt(2)
    m = len(sd)
    corr = np.atleast_2d(np.corrcoef(clipped, rowvar=False)) if m > 1 else np.ones((1, 1))
    off = corr[~np.eye(m, dtype=bool)]
    rho = float(np.clip(np.nanmean(off), 0.0, MAX_RHO)) if len(off) else 0.0
    shared = (1 - rho) * np.eye(m) + rho * np.ones((m, m))
    return shared * np.outer(sd, sd)


def gls_weights(cov: np.ndarray, members: np.ndarray) -> np.ndarray:
    """w = S^-1 d / (d' S^-1 d): the minimum-variance weights that move by a common step of the
    members (d: 1 for a member, 0 otherwise)."""
    d = members.astype(float)
    solved = np.linalg.solve(cov, d)
    return solved / float(d @ solved)


def combined_series(logs: np.ndarray, members: np.ndarray, fitted: int | None = None) -> list[float]:
    """The combined series of one group as positive values (exp of c_t; NaN where a metric is
    missing), weighted by the covariance of the first `fitted` runs (all when None); all NaN when it
    cannot be estimated."""
    cov = covariance(logs[:fitted])
    if cov is None or not np.all(np.isfinite(cov)):
        return [math.nan] * len(logs)
    values = np.exp(logs @ gls_weights(cov, members))  # NaN propagates from any missing metric
    return [float(v) for v in values]
