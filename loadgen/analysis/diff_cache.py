"""The prefix-cache state as a fact of `loadgen diff`: the share of prompt tokens the engine served
from its cache. A cold and a warm run of the same prompts differ in TTFT for that reason alone, so
when the two runs' hit ratios differ strongly (by `STRONG_GAP` or more, absolute) the row ranks first
of all (kind `cache_state`, before the engine); a smaller gap of at least `MIN_GAP` is an ordinary
`cache` row.

Each run's figure is the first it has of: the hit ratio the engine reported per request
(`cache.reported.hit_ratio`, from `usage.prompt_tokens_details`), else its prefix-cache counters over
the run (`cache.hit_ratio`). The row's details give every source of both runs, the workload's
implied bound (`cache.implied.hit_ratio`) included, which says whether the workload itself changed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from loadgen.analysis.diff_rank import CACHE_COMPARED, Difference
from loadgen.results.manifest_schema import as_dict, read_manifest
from loadgen.results.run_fields import ManifestLike

STRONG_GAP = 0.2  # 20 points of prompt tokens served from the cache
MIN_STRONG_GAP = 0.05
PREFILL_FACTOR = 2.0
MISS_FLOOR = 0.01
MIN_GAP = 0.02
WEIGHT = 0.75  # a weaker gap, inside the cache kind
KEY = "cache.hit_ratio"
SOURCES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("cache.reported.hit_ratio", ("reported", "hit_ratio")),
    ("cache.hit_ratio", ("hit_ratio",)),
    ("cache.implied.hit_ratio", ("implied", "hit_ratio")),
)
COMPARED = CACHE_COMPARED  # manifest keys this row compares (the generic manifest rows skip them)


def _dig(cache: Mapping[str, Any], path: tuple[str, ...]) -> float | None:
    value: Any = cache
    for part in path:
        value = value.get(part) if isinstance(value, Mapping) else None
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _cache(manifest: ManifestLike, summary: Mapping[str, Any]) -> Mapping[str, Any]:
    return read_manifest(manifest).cache.raw or as_dict(summary.get("cache"))


def measured_hit_ratio(manifest: ManifestLike, summary: Mapping[str, Any]) -> tuple[float | None, str]:
    """(hit ratio, the key it was read from): reported per request, else the engine's counters."""
    cache = _cache(manifest, summary)
    for key, path in SOURCES[:2]:
        value = _dig(cache, path)
        if value is not None:
            return value, key
    return None, ""


def strong_gap(a: float, b: float) -> bool:
    """Whether hit ratios `a` and `b` differ strongly (module docstring)."""
    gap = abs(a - b)
    miss_a, miss_b = max(1.0 - a, MISS_FLOOR), max(1.0 - b, MISS_FLOOR)
    factor = max(miss_a, miss_b) / min(miss_a, miss_b)
    return gap >= STRONG_GAP or (gap >= MIN_STRONG_GAP and factor >= PREFILL_FACTOR)


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def cache_rows(
    manifest_a: ManifestLike,
    manifest_b: ManifestLike,
    summary_a: Mapping[str, Any],
    summary_b: Mapping[str, Any],
) -> list[Difference]:
    """The cache-state row (none when either run measured no hit ratio or they are within MIN_GAP)."""
    a, _ = measured_hit_ratio(manifest_a, summary_a)
    b, _ = measured_hit_ratio(manifest_b, summary_b)
    if a is None or b is None or abs(a - b) < MIN_GAP:
        return []
    ca, cb = _cache(manifest_a, summary_a), _cache(manifest_b, summary_b)
    details = tuple(
        Difference(key, _rounded(_dig(ca, path)), _rounded(_dig(cb, path)), 0.0, "cache")
        for key, path in SOURCES
    )
    group, score = ("cache_state", 1.0) if strong_gap(a, b) else ("cache", WEIGHT)
    return [Difference(KEY, _rounded(a), _rounded(b), score, group, details)]
