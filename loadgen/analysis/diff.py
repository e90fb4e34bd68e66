"""Compare two runs: metrics side by side, then every manifest difference ranked by how likely it
explains the gap (a prior weight per kind of fact, from the seed's troubleshooting list, times how
large the change is)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from loadgen.analysis.flatten import flatten

METRICS: tuple[tuple[str, str, str, str], ...] = (
    # label, summary key, stat (or "" for a scalar), unit
    ("request throughput", "request_throughput", "", "req/s"),
    ("output token throughput", "output_token_throughput", "", "tok/s"),
    ("total token throughput", "total_token_throughput", "", "tok/s"),
    ("goodput", "goodput", "", "req/s"),
    ("TTFT p50", "ttft_s", "p50", "s"),
    ("TTFT p99", "ttft_s", "p99", "s"),
    ("TPOT p50", "tpot_s", "p50", "s"),
    ("TPOT p99", "tpot_s", "p99", "s"),
    ("E2E p50", "e2e_s", "p50", "s"),
    ("E2E p99", "e2e_s", "p99", "s"),
    ("error rate", "error_rate", "", ""),
)

# Keys that differ between any two runs and explain nothing.
IGNORED_SUFFIXES = (
    "run_id",
    "started_at",
    "ended_at",
    "partial",
    "experiment_id",
    "collected_at",
    "results_dir",
    "pid",
    "duration_s",
    "partial_reason",
)
IGNORED_PREFIXES = ("experiment.",)
# Exporter checks (throttling, leftover GPU processes, persistence mode, ...) explain variance.
CHECKS_WEIGHT = 0.65

# Prior weight by the key's last component (or a dotted tail), highest = most likely cause.
WEIGHTS: dict[str, float] = {
    "max_num_seqs": 1.0,
    "max_running_requests": 1.0,
    "fingerprint": 0.95,
    "tensor_parallel_size": 0.95,
    "tp_size": 0.95,
    "model": 0.93,
    "engine.engine": 0.92,
    "quantization": 0.9,
    "name": 0.9,
    "max_concurrency": 0.9,
    "rate": 0.9,
    "input_len": 0.9,
    "output_len": 0.9,
    "num_prompts": 0.8,
    "workload": 0.85,
    "profile": 0.85,
    "dataset": 0.85,
    "arrival": 0.85,
    "burstiness": 0.8,
    "kv_cache_dtype": 0.85,
    "dtype": 0.8,
    "interconnect": 0.85,
    "version": 0.8,
    "count": 0.85,
    "prefix_caching": 0.75,
    "enable_prefix_caching": 0.75,
    "disable_radix_cache": 0.75,
    "flushed": 0.7,
    "chunked_prefill": 0.7,
    "enable_chunked_prefill": 0.7,
    "chunked_prefill_size": 0.7,
    "max_num_batched_tokens": 0.7,
    "gpu_memory_utilization": 0.7,
    "mem_fraction_static": 0.7,
    "clock_locks": 0.65,
    "clocks": 0.6,
    "power_limit_w": 0.6,
    "persistence_mode": 0.4,
    "time_scale": 0.9,
    "seed": 0.6,
    "driver_version": 0.6,
    "cuda_version": 0.6,
    "block_size": 0.5,
    "page_size": 0.5,
    "max_model_len": 0.5,
    "context_length": 0.5,
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
SECTION_FACTOR = {"engine.params": 1.0, "engine.server_args": 0.9, "config": 0.88, "exporter": 0.85}
DEFAULT_WEIGHT = 0.1


@dataclass(frozen=True)
class MetricRow:
    """One metric of both runs with absolute and relative delta (B relative to A)."""

    label: str
    unit: str
    a: float | None
    b: float | None

    @property
    def delta(self) -> float | None:
        return None if self.a is None or self.b is None else self.b - self.a

    @property
    def delta_pct(self) -> float | None:
        if self.a is None or self.b is None or self.a == 0:
            return None
        return (self.b - self.a) / abs(self.a) * 100.0


@dataclass(frozen=True)
class Difference:
    """One manifest key whose values differ, with its likelihood score (0..1) of explaining the gap."""

    key: str
    a: Any
    b: Any
    score: float


def metric_rows(summary_a: dict[str, Any], summary_b: dict[str, Any]) -> list[MetricRow]:
    """Side-by-side rows for the metrics every run reports."""
    return [
        MetricRow(label, unit, _metric(summary_a, key, stat), _metric(summary_b, key, stat))
        for label, key, stat, unit in METRICS
    ]


def _metric(summary: dict[str, Any], key: str, stat: str) -> float | None:
    value = (summary.get(key) or {}).get(stat) if stat else summary.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _ignored(key: str) -> bool:
    leaf = key.rsplit(".", 1)[-1]
    return leaf in IGNORED_SUFFIXES or key.startswith(IGNORED_PREFIXES)


def prior_weight(key: str) -> float:
    """Prior likelihood that a difference in `key` explains a performance gap."""
    parts = key.split(".")
    if key.startswith("exporter.checks."):
        return CHECKS_WEIGHT
    leaf = parts[-1] if not parts[-1].isdigit() else parts[-2]
    tail = ".".join(parts[-2:])
    weight = WEIGHTS.get(tail, WEIGHTS.get(leaf, DEFAULT_WEIGHT))
    factor = next((f for prefix, f in SECTION_FACTOR.items() if key.startswith(prefix + ".")), 0.8)
    return weight * factor


def magnitude(a: Any, b: Any) -> float:
    """How big a change is, 0.5..1: numbers by log ratio, anything else counts as a full change."""
    fa, fb = _as_float(a), _as_float(b)
    if fa is None or fb is None or fa <= 0 or fb <= 0:
        return 1.0
    return min(1.0, 0.5 + abs(math.log(fb / fa)))


def _as_float(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    try:
        return float(str(value))
    except ValueError:
        return None


def manifest_differences(manifest_a: dict[str, Any], manifest_b: dict[str, Any]) -> list[Difference]:
    """Every differing manifest key (missing on one side counts), most likely cause first."""
    flat_a, flat_b = flatten(manifest_a), flatten(manifest_b)
    diffs = []
    for key in sorted(set(flat_a) | set(flat_b)):
        a, b = flat_a.get(key), flat_b.get(key)
        if _ignored(key) or _same(a, b):
            continue
        diffs.append(Difference(key, a, b, round(prior_weight(key) * magnitude(a, b), 4)))
    return sorted(diffs, key=lambda d: (-d.score, d.key))


def _same(a: Any, b: Any) -> bool:
    if a == b:
        return True
    fa, fb = _as_float(a), _as_float(b)
    return fa is not None and fa == fb


def workload_warnings(manifest_a: dict[str, Any], manifest_b: dict[str, Any]) -> list[str]:
    """Warnings that make the comparison questionable: different workloads, uncleared caches."""
    warnings = []
    fa = (manifest_a.get("workload") or {}).get("fingerprint")
    fb = (manifest_b.get("workload") or {}).get("fingerprint")
    if fa != fb:
        warnings.append(
            f"the runs used different workloads (fingerprint {fa} vs {fb}): "
            "the free variables are not identical, so the gap may come from the load itself"
        )
    for name, manifest in (("A", manifest_a), ("B", manifest_b)):
        if (manifest.get("cache") or {}).get("flushed") is False:
            warnings.append(f"run {name}'s prefix cache could not be cleared before it ran")
        if manifest.get("partial"):
            warnings.append(f"run {name} is partial (interrupted)")
    return warnings
