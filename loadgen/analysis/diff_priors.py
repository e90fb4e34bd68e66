"""The stated priors of `loadgen diff`: the order of the kinds of fact (engine, version, model, endpoint,
measured tokens, workload and neutral parameters, GPU facts, context), a weight per key inside a kind,
and how much a numeric change counts. The README's `loadgen diff` section states the same table."""

from __future__ import annotations

import math
from typing import Any

# Kind of fact -> its place in the ranking (lower first); a strong cache-state gap (diff_cache) first.
# Workload definition, cache state and the neutral launch parameters share one place and are ordered
# among themselves by WEIGHTS.
GROUP_ORDER: dict[str, int] = {
    "cache_state": -1,  # a strong gap in prefix-cache hit ratio (diff_cache): a cold vs a warm run
    "engine": 0,
    "version": 1,
    "model": 2,
    "endpoint": 3,
    "tokens": 4,
    "params": 5,
    "workload": 5,
    "cache": 5,
    "gpu": 6,
    "checks": 6,
    "context": 7,
}

# Prior weight by the key's last component (or a dotted tail), inside its kind; highest first.
WEIGHTS: dict[str, float] = {
    "max_num_seqs": 1.0,
    "fingerprint": 0.95,
    "tensor_parallel_size": 0.95,
    "quantization": 0.9,
    "name": 0.9,
    "max_concurrency": 0.9,
    "rate": 0.9,
    "input_len": 0.9,
    "output_len": 0.9,
    "input_tokens_per_request": 1.0,
    "output_tokens_per_request": 0.95,
    "num_prompts": 0.8,
    "num_requests": 0.8,
    "workload": 0.85,
    "profile": 0.85,
    "dataset": 0.85,
    "arrival": 0.85,
    "prompt_kind": 0.85,
    "burstiness": 0.8,
    "kv_cache_dtype": 0.85,
    "dtype": 0.8,
    "interconnect": 0.85,
    "count": 0.85,
    "prefix_caching": 0.75,
    "flushed": 0.7,
    "chunked_prefill": 0.7,
    "max_num_batched_tokens": 0.7,
    "gpu_memory_utilization": 0.7,
    "clock_locks": 0.65,
    "locked": 0.65,
    "power_limit_w": 0.6,
    "persistence_mode": 0.4,
    "time_scale": 0.9,
    "seed": 0.6,
    "driver_version": 0.6,
    "cuda_version": 0.6,
    "memory_total_bytes": 0.6,
    "block_size": 0.5,
    "max_model_len": 0.5,
    "cpu_model": 0.4,
    "cpu_count": 0.4,
    "hostname": 0.3,
    "python": 0.2,
    "git_sha": 0.2,
    "base_url": 0.15,
    "method": 0.3,
    "detail": 0.1,
    "tool.version": 0.2,
}
DEFAULT_WEIGHT = 0.1
CHECKS_WEIGHT = 0.65  # exporter checks (throttling, leftover GPU processes, ...) explain variance
UNRECORDED_WEIGHT = 0.95  # neutral params one run did not record: the first context row

# Raw keys shown only as context, one row per group (prefix -> weight), first matching prefix wins.
CONTEXT_GROUPS: tuple[tuple[str, float], ...] = (
    ("engine.server_args", 0.9),
    ("config.sim_args", 0.88),
    ("exporter.engines", 0.85),
    ("config", 0.5),
    ("exporter.gpus", 0.4),
    ("exporter", 0.4),
    ("client", 0.4),
    ("engine", 0.15),
    ("tool", 0.2),
)


def prior_weight(key: str) -> float:
    """Prior likelihood (0..1), inside its kind, that a difference in `key` explains a gap."""
    if key.startswith("exporter.checks."):
        return CHECKS_WEIGHT
    parts = key.split(".")
    leaf = parts[-1] if not parts[-1].isdigit() or len(parts) == 1 else parts[-2]
    return WEIGHTS.get(".".join(parts[-2:]), WEIGHTS.get(leaf, DEFAULT_WEIGHT))


def context_group(key: str) -> tuple[str, float]:
    """The context group a raw key is listed under, and the group's weight."""
    for prefix, weight in CONTEXT_GROUPS:
        if key == prefix or key.startswith((prefix + ".", prefix + "[")):
            return prefix, weight
    return key.split(".", 1)[0], DEFAULT_WEIGHT


def as_float(value: Any) -> float | None:
    """A number, or None for anything that is not one (booleans included)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    try:
        return float(str(value))
    except ValueError:
        return None


def magnitude(a: Any, b: Any) -> float:
    """How big a change is, 0.5..1: numbers by log ratio, anything else counts as a full change."""
    fa, fb = as_float(a), as_float(b)
    if fa is None or fb is None or fa <= 0 or fb <= 0 or math.isinf(fa) or math.isinf(fb):
        return 1.0
    return min(1.0, 0.5 + abs(math.log(fb / fa)))


def same(a: Any, b: Any) -> bool:
    """Equal values, numbers compared as numbers (`"64"` and `64` are the same)."""
    if a == b:
        return True
    fa, fb = as_float(a), as_float(b)
    return fa is not None and fa == fb
