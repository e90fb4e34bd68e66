"""Clip generated request lengths to the engine's model length (`max_model_len`).

An engine answers HTTP 400 to a request whose prompt plus `max_tokens` exceeds its model length;
a long-tailed length distribution (lognormal) draws such requests now and then. The clip is a pure
function of the drawn lengths and the model length, so a workload stays deterministic in its
definition (generator, options, seed) and the model length it was clipped to:

    input  = min(drawn input, max_model_len - 1)
    output = min(drawn output, max_model_len - input)

The prompt keeps its drawn length where it can (it is what a long-tail workload is about).
"""

from __future__ import annotations

import math

from loadgen.workload.distributions import LengthDist


def upper_bound(dist: LengthDist) -> float:
    """The largest length a distribution can draw (inf for normal and lognormal)."""
    if dist.kind == "fixed":
        return dist.a
    if dist.kind == "uniform":
        return dist.b
    return math.inf


def clip_needed(input_dist: LengthDist, output_dist: LengthDist, prefix_len: int, max_model_len: int) -> bool:
    """True when prefix + input + output can exceed `max_model_len` (so the workload is clipped)."""
    return prefix_len + upper_bound(input_dist) + upper_bound(output_dist) > max_model_len


def clip_lengths(n_in: int, n_out: int, max_model_len: int) -> tuple[int, int]:
    """(input, output) with input + output <= max_model_len, the input kept where it fits."""
    clipped_in = min(n_in, max_model_len - 1)
    return clipped_in, max(1, min(n_out, max_model_len - clipped_in))
