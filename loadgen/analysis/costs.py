"""Cost per million tokens and the seed's production advice (DIGEST items 17 and 18)."""

from __future__ import annotations

import math

HEADROOM = 0.20
PRODUCTION_MEMORY_FRACTION = 0.85


def cost_per_million_tokens(cost_per_hour: float, tokens_per_s: float) -> float | None:
    """cost/hour / 3600 s x 1e6 / tokens per second; e.g. 20 /h at 2000 tok/s = 2.78 per 1M tokens."""
    if tokens_per_s <= 0 or cost_per_hour < 0:
        return None
    return cost_per_hour / 3600.0 * 1e6 / tokens_per_s


def max_num_seqs_advice(concurrency_at_sla: float | None, headroom: float = HEADROOM) -> int | None:
    """`max_num_seqs` ceiling for production: the concurrency that held the SLA, less 20% headroom."""
    if concurrency_at_sla is None or concurrency_at_sla <= 0:
        return None
    return max(1, math.floor(concurrency_at_sla * (1.0 - headroom)))
