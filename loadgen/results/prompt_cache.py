"""A run's `cache` facts: the engine's prefix-cache counters, what it reported per request
(`usage.prompt_tokens_details.cached_tokens`) and the hit ratio the workload's prompts imply.

    cache = {hit_tokens, queried_tokens, hit_ratio}      engine counters over the load (cache_counters)
          + reported: {requests_with_details, cached_tokens, prompt_tokens, hit_ratio,
                       cached_share_of_input}           (loadgen.prefix_cache.reported_facts)
          + implied:  {block_size, block_size_from, bound, cached_tokens, prompt_tokens, hit_ratio}
                                                        (loadgen.prefix_cache.implied_facts)

The implied figures take each sent request's prompt in send order: its block hashes as the finisher
digests the request (`SentBlocks`: off the send path, 8 bytes a block), else re-drawn from the seeded
workload (`request(index)`, deterministic) after the load; text prompts (no token ids) and runs of
more than `IMPLIED_MAX_TOKENS` prompt tokens get none, with the reason. A workload
whose prompts cannot be re-drawn (a session's next turn holds the engine's answer) may offer
`implied_prompts(indices) -> list[list[int]] | None`: the token ids it sent for those requests.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from loadgen.prefix_cache import (
    DEFAULT_BLOCK_SIZE,
    TEXT_PROMPTS,
    SentBlocks,
    implied_facts,
    reported_facts,
    too_many_tokens,
)
from loadgen.records import RequestRecord
from loadgen.results.manifest_schema import Manifest, read_manifest
from loadgen.targets.cache_counters import CacheCounters, cache_facts

IMPLIED_MAX_TOKENS = 50_000_000  # ~7 s of re-drawing and hashing; larger runs are not re-drawn


def sent_prompts(workload: Any, sent: Sequence[RequestRecord]) -> tuple[list[list[int]] | None, str]:
    """The token-id prompts of the sent requests (in the given order), or None and why not."""
    own = getattr(workload, "implied_prompts", None)
    if callable(own):
        given = own([r.index for r in sent])
        return (list(given), "") if given is not None else (None, "the workload gives no token-id prompts")
    request = getattr(workload, "request", None)
    if request is None:
        return None, "the workload cannot re-draw its requests"
    prompts: list[list[int]] = []
    total = 0
    for record in sent:
        prompt = request(record.index).prompt
        if not isinstance(prompt, list):
            return None, TEXT_PROMPTS
        total += len(prompt)
        if total > IMPLIED_MAX_TOKENS:
            return None, too_many_tokens(IMPLIED_MAX_TOKENS)
        prompts.append(prompt)
    return prompts, ""


def engine_block_size(manifest: Mapping[str, Any] | Manifest) -> int | None:
    """The engine's KV block size from the manifest's neutral parameters (None when unknown)."""
    value = read_manifest(manifest).engine.params.get("block_size")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def sent_blocks(workload: Any, block_size: int | None) -> SentBlocks | None:
    """What keeps the run's prompt blocks as they are sent (`SentBlocks`), for a workload whose prompts
    would be re-drawn after the load; None for one that gives its own (`implied_prompts`)."""
    if callable(getattr(workload, "implied_prompts", None)):
        return None
    return SentBlocks(block_size or DEFAULT_BLOCK_SIZE, IMPLIED_MAX_TOKENS)


def run_cache_facts(
    counters: Sequence[CacheCounters | None],
    records: Sequence[RequestRecord],
    workload: Any,
    block_size: int | None,
    total_input_tokens: int,
    kept: SentBlocks | None = None,
) -> dict[str, Any]:
    """The run's `cache` block of summary.json and manifest.json (module docstring); `kept`: the blocks
    kept as the requests were sent, used when it holds every sent request's at this block size."""
    facts = cache_facts(counters)
    facts["reported"] = reported_facts(records, total_input_tokens)
    sent = sorted((r for r in records if r.sent_ns), key=lambda r: (r.sent_ns, r.index))
    measured = [not r.warmup and r.outcome == "ok" for r in sent]
    if kept is not None and kept.block_size == (block_size or DEFAULT_BLOCK_SIZE):
        if kept.why_not:
            facts["implied"] = implied_facts(None, block_size, why_not=kept.why_not)
            return facts
        blocks = kept.in_order([r.index for r in sent])
        if blocks is not None:
            facts["implied"] = implied_facts(None, block_size, measured, blocks=blocks)
            return facts
    try:
        prompts, why = sent_prompts(workload, sent)
    except Exception as exc:  # noqa: BLE001 - a workload that cannot re-draw must not cost the run's record
        prompts, why = None, f"re-drawing the prompts failed: {type(exc).__name__}: {exc}"
    facts["implied"] = implied_facts(prompts, block_size, measured, why)
    return facts


SHARDS_NOT_MERGED = "a merge of shards: each shard read the engine's counters over its own window"
IMPLIED_NOT_MERGED = "a merge of shards: the implied bound needs every shard's prompts in send order"


def merged_cache_facts(records: Sequence[RequestRecord], total_input_tokens: int) -> dict[str, Any]:
    """The `cache` block of a merged run: what the engine reported, over every shard's requests; the
    counters and the implied bound are per shard (in each shard's own record) and are not summed."""
    return {
        "hit_tokens": None,
        "queried_tokens": None,
        "hit_ratio": None,
        "counters_not_merged": SHARDS_NOT_MERGED,
        "reported": reported_facts(records, total_input_tokens),
        "implied": implied_facts(None, None, why_not=IMPLIED_NOT_MERGED),
    }
