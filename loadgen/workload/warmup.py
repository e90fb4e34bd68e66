"""Whether a run's warm-up covers its start burst (issue 11 item 22).

At a fixed concurrency C the first C requests leave together and meet a cold engine (empty batch,
first CUDA graphs, an empty cache); with `warmup` W < C, C - W of that burst are measured, and their
slow TTFT drives the percentiles and any SLA verdict. Pure: `warmup_warning` over two numbers.
"""

from __future__ import annotations


def warmup_warning(warmup: int, concurrency: int | None) -> str | None:
    """A warning when `warmup` is smaller than the concurrency (None: no cap, nothing to say)."""
    if concurrency is None or warmup >= concurrency:
        return None
    measured = concurrency - warmup
    return (
        f"warmup {warmup} is smaller than the concurrency {concurrency}: {measured} requests of the "
        f"start burst are measured; set warmup >= {concurrency}"
    )
