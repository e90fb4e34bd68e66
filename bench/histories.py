"""Seeded synthetic baseline histories: noisy series with single outliers and steps at known runs.

Noise is multiplicative (lognormal with the given coefficient of variation), as run-to-run spread of
latency percentiles is; an outlier run is off by 15-40% either way; a step multiplies every run from
`step_at` on. The metric is a latency (higher is worse), so a positive step is a regression.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass


@dataclass(frozen=True)
class History:
    """One synthetic series and where its step is (None: step-free)."""

    values: list[float]
    step_at: int | None
    step: float
    cv: float


def history(
    rng: random.Random,
    *,
    cv: float,
    step: float = 0.0,
    length: tuple[int, int] = (30, 60),
    outlier_rate: float = 0.02,
    base: float = 0.05,
    after: int = 8,
) -> History:
    """A series of `length` runs; with `step`, a step at a run leaving >= 15 before and `after` after."""
    n = rng.randint(*length)
    step_at = rng.randint(15, n - after) if step else None
    sigma = math.sqrt(math.log(1 + cv * cv))
    values = []
    for i in range(n):
        level = base * (1 + step if step_at is not None and i >= step_at else 1)
        value = level * math.exp(rng.gauss(-sigma * sigma / 2, sigma))
        if rng.random() < outlier_rate:
            value *= 1 + rng.choice((-1, 1)) * rng.uniform(0.15, 0.40)
        values.append(value)
    return History(values, step_at, step, cv)
