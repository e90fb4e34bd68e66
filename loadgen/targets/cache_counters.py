"""The engine's own prefix-cache counters over a run: how many prompt tokens hit a warm cache.

loadgen reads the engine's `/metrics` when the load starts and when it ends; the difference of the
two counters its spec names (`EngineSpec.cache_counters`: vLLM `prefix_cache_hits` /
`prefix_cache_queries`, SGLang `cached_tokens` / `prompt_tokens`) is the run's `cache` facts:

    hit_ratio = (hits_end - hits_start) / (queried_end - queried_start)

Reading (`read_counters`) is apart from parsing (`parse_counters`, pure) and arithmetic
(`cache_facts`, `cache_warning`, pure). An engine without counters gives `None` facts, never an error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from infergauge import engines
from infergauge.engines.base import EngineSpec
from loadgen.transport.plainhttp import HttpSession, client_errors

METRICS_PATH = "/metrics"
WARM_HIT_RATIO = 0.05  # above this share of prompt tokens served from the cache a run is warm
_TIMEOUT = 5.0  # s, whole request


@dataclass(frozen=True)
class CacheCounters:
    """Cumulative prompt tokens found in (hits) and looked up in (queried) the prefix cache."""

    hit_tokens: float
    queried_tokens: float


def counter_sum(text: str, name: str) -> float | None:
    """Sum of every sample named `name` (all label sets) in a Prometheus text body; None if absent."""
    from prometheus_client.parser import text_string_to_metric_families  # only with counters to read

    values = [
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name
    ]
    return sum(values) if values else None


def parse_counters(spec: EngineSpec, text: str) -> CacheCounters | None:
    """The spec's cache counters in a /metrics body; None when the spec names none or the body is
    not Prometheus text."""
    if spec.cache_counters is None:
        return None
    hit_name, queried_name = (spec.metric(role) for role in spec.cache_counters)
    if hit_name is None or queried_name is None:
        return None
    try:
        queried = counter_sum(text, queried_name)
        hits = counter_sum(text, hit_name)
    except ValueError:  # not a Prometheus text body
        return None
    # SGLang creates its counters at the first request (and the hit counter at the first hit):
    # a counter absent from a body that parsed is still zero
    return CacheCounters(hits or 0.0, queried or 0.0)


def spec_for(speaks: str | None, engine: str | None) -> EngineSpec | None:
    """The spec whose metric names a server uses: the engine it speaks as, else its label."""
    for name in (speaks, engine):
        if name in engines.ENGINES:
            return engines.get(name)
    return None


async def read_counters(session: HttpSession, base_url: str, spec: EngineSpec | None) -> CacheCounters | None:
    """GET the engine's /metrics and parse its cache counters; None on any failure (best effort)."""
    if spec is None or spec.cache_counters is None:
        return None
    try:
        async with session.get(f"{base_url}{METRICS_PATH}", timeout=_TIMEOUT) as resp:
            if resp.status != 200:
                return None
            text = await resp.text()
    except client_errors(TimeoutError, UnicodeDecodeError):
        return None
    return parse_counters(spec, text)


async def engine_counters(
    session: HttpSession, base_url: str, speaks: str | None, engine: str | None
) -> CacheCounters | None:
    """The cache counters of the engine at `base_url`, named by the spec it speaks as."""
    return await read_counters(session, base_url, spec_for(speaks, engine))


def cache_facts(readings: Sequence[CacheCounters | None]) -> dict[str, Any]:
    """`hit_tokens`, `queried_tokens`, `hit_ratio` between the first and last reading (None when
    either is missing)."""
    start, end = (readings[0], readings[-1]) if len(readings) >= 2 else (None, None)
    if start is None or end is None:
        return {"hit_tokens": None, "queried_tokens": None, "hit_ratio": None}
    hits = max(0, round(end.hit_tokens - start.hit_tokens))
    queried = max(0, round(end.queried_tokens - start.queried_tokens))
    return {"hit_tokens": hits, "queried_tokens": queried, "hit_ratio": hits / queried if queried else None}


def cache_warning(run_id: str, cache: Mapping[str, Any], threshold: float = WARM_HIT_RATIO) -> str | None:
    """A console warning when the run measured a warm prefix cache: a hit ratio more than
    `threshold` above what the workload's own repeated prompt blocks imply (`cache.implied`, an
    upper bound; 0 when not computed), so a shared-prefix run on a cold cache is not warned about."""
    ratio = cache.get("hit_ratio")
    if ratio is None or ratio <= threshold:
        return None
    implied = (cache.get("implied") or {}).get("hit_ratio") or 0.0
    if ratio - implied <= threshold:
        return None  # the workload's own shared prefixes explain the hits: the cache was cold
    hits_text = f"{cache.get('hit_tokens')} of {cache.get('queried_tokens')} prompt tokens ({ratio:.0%})"
    if implied:
        hits_text += f", where the workload's repeated prefixes explain {implied:.0%},"
    if cache.get("flushed") is True:
        why = f"it was meant to be cold ({cache.get('method')})"
    else:
        why = f"the cache was not cleared before it ({cache.get('detail') or 'no flush asked'})"
    return f"warning: run {run_id} measured a warm prefix cache: {hits_text} were cache hits, but {why}"
