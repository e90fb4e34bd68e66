"""Valid ranges of the engine-neutral launch parameters a plan may set (keyed by the neutral names).

The plan checks use this table so `max_num_seqs: -8` fails before anything launches, with the line.
Parameters without an entry (strings, booleans) are only type-checked.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Range:
    """Numbers from `low` to `high` (None: unbounded); `low_open` excludes `low` itself."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False

    def holds(self, value: float) -> bool:
        """Whether `value` is finite and inside the range."""
        if not math.isfinite(value):
            return False
        if self.low is not None and (value <= self.low if self.low_open else value < self.low):
            return False
        return self.high is None or value <= self.high

    def __str__(self) -> str:
        if self.high is None:
            return f"{'>' if self.low_open else '>='} {self.low:g}"
        return f"in {'(' if self.low_open else '['}{self.low:g}, {self.high:g}]"


AT_LEAST_ONE = Range(low=1)
PARAM_RANGES: dict[str, Range] = {
    "tensor_parallel_size": AT_LEAST_ONE,
    "max_num_seqs": AT_LEAST_ONE,
    "gpu_memory_utilization": Range(low=0, high=1, low_open=True),  # a share of the GPU's memory
    "max_model_len": AT_LEAST_ONE,
    "block_size": AT_LEAST_ONE,
    "max_num_batched_tokens": AT_LEAST_ONE,  # chunking off is `chunked_prefill: false`, not -1
    "seed": Range(low=0),
}


def range_problem(key: str, value: float) -> str | None:
    """`invalid max_num_seqs -8: must be >= 1`, or None when the value is in range (or unranged)."""
    valid = PARAM_RANGES.get(key)
    if valid is None or valid.holds(value):
        return None
    return f"invalid {key} {value!r}: must be {valid}"
