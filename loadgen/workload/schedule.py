"""Open-loop send schedule, computed up front from the seed (coordinated-omission guard).

Offsets are nanoseconds after the run's start. Inter-arrival gaps:
- constant: 1/rate;  poisson: Exp(rate) (gamma with shape 1);
- gamma: Gamma(shape=burstiness, scale=1/(rate*burstiness)), mean 1/rate, CV = 1/sqrt(burstiness)
  (burstiness < 1 is burstier than Poisson, > 1 smoother), as `vllm bench serve --burstiness`.
Rate `inf` puts every request at offset 0. The first request is at offset 0.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator

from loadgen.config import RunConfig

NS = 1_000_000_000


def gaps(rate: float, arrival: str, burstiness: float, rng: random.Random) -> Iterator[float]:
    """Inter-arrival gaps in seconds, forever."""
    if math.isinf(rate):
        while True:
            yield 0.0
    shape = 1.0 if arrival == "poisson" else burstiness
    while True:
        if arrival == "constant":
            yield 1.0 / rate
        else:
            yield rng.gammavariate(shape, 1.0 / (rate * shape))


def send_offsets(rate: float, arrival: str, burstiness: float, seed: int) -> Iterator[int]:
    """Scheduled send offsets (ns) of requests 0, 1, 2, ... forever."""
    rng = random.Random(f"{seed}:schedule")
    elapsed = 0.0
    stream = gaps(rate, arrival, burstiness, rng)
    while True:
        yield round(elapsed * NS)
        elapsed += next(stream)


def build_schedule(config: RunConfig, limit: int = 10_000_000) -> list[int]:
    """The run's scheduled offsets: `total_requests` of them, cut at `duration_s` when given.

    With rate `inf` and only a duration, the count is unknown up front: the list holds `limit`
    zero offsets and the runner stops dispatching when the duration has passed.
    """
    total = config.total_requests
    horizon_ns = None if config.duration_s is None else round(config.duration_s * NS)
    out: list[int] = []
    for offset in send_offsets(config.rate, config.arrival, config.burstiness, config.seed):
        if total is not None and len(out) >= total:
            break
        if horizon_ns is not None and offset >= horizon_ns and not math.isinf(config.rate):
            break
        if len(out) >= limit:
            break
        out.append(offset)
    return out
