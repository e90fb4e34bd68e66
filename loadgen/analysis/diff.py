"""Compare two runs: metrics side by side, then the differences ranked by how likely they explain the
gap. Facts first, in the stated order of `diff_priors.GROUP_ORDER` (engine, version, model, endpoint,
measured tokens per request, workload and neutral launch parameters, GPU facts); raw server and
exporter arguments only below them, one context row per group. A raw argument that spells a neutral
parameter is never a row of its own: the neutral row (compared once) says it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from loadgen.analysis.diff_cache import cache_rows
from loadgen.analysis.diff_facts import resolve_params, run_facts
from loadgen.analysis.diff_priors import GROUP_ORDER
from loadgen.analysis.diff_rank import Difference, fact_rows, keyed_rows, param_rows
from loadgen.results.manifest_schema import read_manifest
from loadgen.results.run_fields import ManifestLike

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


def metric_rows(summary_a: Mapping[str, Any], summary_b: Mapping[str, Any]) -> list[MetricRow]:
    """Side-by-side rows for the metrics every run reports."""
    return [
        MetricRow(label, unit, _metric(summary_a, key, stat), _metric(summary_b, key, stat))
        for label, key, stat, unit in METRICS
    ]


def _metric(summary: Mapping[str, Any], key: str, stat: str) -> float | None:
    value = (summary.get(key) or {}).get(stat) if stat else summary.get(key)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def manifest_differences(
    manifest_a: ManifestLike,
    manifest_b: ManifestLike,
    summary_a: Mapping[str, Any] | None = None,
    summary_b: Mapping[str, Any] | None = None,
) -> list[Difference]:
    """Every difference of two runs, most likely cause first (summaries add measured tokens); both
    manifests are read through the one schema (older records upgraded first)."""
    ma, mb = read_manifest(manifest_a), read_manifest(manifest_b)
    sa, sb = summary_a or {}, summary_b or {}
    fa, fb = run_facts(ma, sa), run_facts(mb, sb)
    rows = cache_rows(ma, mb, sa, sb) + fact_rows(fa, fb) + param_rows(fa, fb)
    rows += keyed_rows(ma, mb, fa, fb)
    return sorted(rows, key=lambda d: (GROUP_ORDER[d.group], -d.score, d.key))


def workload_warnings(manifest_a: ManifestLike, manifest_b: ManifestLike) -> list[str]:
    """Warnings that make the comparison questionable: different workloads, uncleared caches."""
    warnings = []
    ma, mb = read_manifest(manifest_a), read_manifest(manifest_b)
    fa, fb = ma.workload.fingerprint, mb.workload.fingerprint
    if fa != fb:
        warnings.append(
            f"the runs used different workloads (fingerprint {fa} vs {fb}): "
            "the free variables are not identical, so the gap may come from the load itself"
        )
    warnings += unrecorded_warnings(ma, mb)
    for name, manifest in (("A", ma), ("B", mb)):
        if manifest.cache.flushed is False:
            warnings.append(f"run {name}'s prefix cache could not be cleared before it ran")
        if manifest.partial:
            warnings.append(f"run {name} is partial (interrupted)")
    return warnings


def unrecorded_warnings(manifest_a: ManifestLike, manifest_b: ManifestLike) -> list[str]:
    """A warning per run that lacks neutral parameters the other run recorded (they cannot be compared)."""
    params = {"A": resolve_params(manifest_a)[0], "B": resolve_params(manifest_b)[0]}
    out = []
    for name, other in (("A", "B"), ("B", "A")):
        missing = [k for k, v in params[name].items() if v is None and params[other][k] is not None]
        if missing:
            out.append(
                f"run {name} recorded no {', '.join(missing)}: not compared (its engine showed no "
                "launch flags over HTTP; run with --exporter-url so the exporter reads its command line)"
            )
    return out
