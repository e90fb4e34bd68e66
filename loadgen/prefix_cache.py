"""Prefix-cache figures of a run, pure: what the engine reported per request and what the workload implies.

Reported (`reported_facts`), from `usage.prompt_tokens_details.cached_tokens` of each measured ok
request (vLLM with `--enable-prompt-tokens-details`, SGLang with `--enable-cache-report`; None on a
request whose engine sent no details):

    hit_ratio             = sum(cached_tokens) / sum(prompt_tokens), over the requests with details
    cached_share_of_input = sum(cached_tokens) / total input tokens of every ok request

Implied (`implied_cached_tokens`, `implied_facts`), from the prompts' token ids alone: an infinite
cache of `block_size`-token blocks keyed, as vLLM keys them, by a hash chained over every earlier
block, so a block counts as cached only when its whole prefix chain was in an earlier prompt. As the
engines do, the block holding a prompt's last token is never counted (its logits must be computed):

    implied cached tokens of prompt p = block_size * min(leading blocks of p seen before,
                                                         (len(p) - 1) // block_size)

It is an upper bound on what any engine could reuse: a real cache is finite (LRU eviction), a block
counts only once its prompt's prefill has finished (two equal prompts sent together both miss), and
a flush empties it. Only prompt blocks are counted, not generated tokens.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from infergauge.blocks import chained_block_hashes
from loadgen.records import RequestRecord

if TYPE_CHECKING:
    from loadgen.workload.generator import RequestSpec

DEFAULT_BLOCK_SIZE = 16  # vLLM's default block size, used when the engine's is not known
TEXT_PROMPTS = "text prompts: the implied ratio needs token ids (token-id prompts on completions)"


def too_many_tokens(max_tokens: int) -> str:
    """Why a run of more than `max_tokens` prompt tokens has no implied figures."""
    return f"over {max_tokens} prompt tokens: not re-drawn"


BOUND = "upper bound: an infinite cache of whole blocks, prompts in send order (no eviction, no flush)"


def implied_cached_tokens(prompts: Iterable[Sequence[int]], block_size: int) -> list[int]:
    """Per prompt (in send order), the tokens an infinite block cache would have served (module doc)."""
    if block_size < 1:
        raise ValueError(f"block size must be >= 1, got {block_size}")
    return implied_from_blocks(((chained_block_hashes(p, block_size), len(p)) for p in prompts), block_size)


def implied_from_blocks(prompts: Iterable[tuple[Sequence[int], int]], block_size: int) -> list[int]:
    """`implied_cached_tokens` of prompts given as (their chained block hashes, their length)."""
    seen: set[int] = set()
    out: list[int] = []
    for hashes, length in prompts:
        hits = 0
        for h in hashes:
            if h not in seen:
                break
            hits += 1
        out.append(block_size * min(hits, max(length - 1, 0) // block_size))
        seen.update(hashes)
    return out


class SentBlocks:
    """The chained block hashes of each sent token-id prompt, taken as the finisher digests the request
    (`SentDigest.also`, off the send path: ~3 µs a 32-token prompt), so the implied figures need not
    re-draw every prompt after the load (~12 µs a request). 8 bytes a block, at most `max_tokens`
    prompt tokens (a longer run keeps none: ~25 MB at the default 50M); `why_not` says why none are
    kept (text prompts, too many tokens)."""

    def __init__(self, block_size: int, max_tokens: int) -> None:
        self.block_size, self.max_tokens = block_size, max_tokens
        self.hashes: array[int] = array("q")
        self.ends: array[int] = array("q")  # where each prompt's hashes end in `hashes`
        self.lengths: array[int] = array("q")
        self.indices: array[int] = array("q")  # each prompt's request index
        self.tokens = 0
        self.why_not = ""

    def add(self, spec: RequestSpec) -> None:
        """One sent request's prompt (in the order they are digested)."""
        if self.why_not:
            return
        prompt = spec.prompt
        if not isinstance(prompt, list):
            self._give_up(TEXT_PROMPTS)
            return
        self.tokens += len(prompt)
        if self.tokens > self.max_tokens:
            self._give_up(too_many_tokens(self.max_tokens))
            return
        self.hashes.extend(chained_block_hashes(prompt, self.block_size))
        self.ends.append(len(self.hashes))
        self.lengths.append(len(prompt))
        self.indices.append(spec.index)

    def _give_up(self, why: str) -> None:
        self.why_not = why
        self.hashes, self.ends, self.lengths, self.indices = array("q"), array("q"), array("q"), array("q")

    def in_order(self, indices: Sequence[int]) -> list[tuple[Sequence[int], int]] | None:
        """(hashes, length) of the prompts of these requests, in this order; None when one was not kept."""
        at = {index: i for i, index in enumerate(self.indices)}
        out: list[tuple[Sequence[int], int]] = []
        for index in indices:
            i = at.get(index)
            if i is None:
                return None
            out.append((self.hashes[self.ends[i - 1] if i else 0 : self.ends[i]], self.lengths[i]))
        return out


def _ratio(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def implied_facts(
    prompts: Sequence[Sequence[int]] | None,
    block_size: int | None,
    measured: Sequence[bool] | None = None,
    why_not: str = "",
    blocks: Sequence[tuple[Sequence[int], int]] | None = None,
) -> dict[str, Any]:
    """The run's implied hit ratio: `prompts` are every sent prompt in send order (warmup included,
    they warm the cache too), or `blocks` their (block hashes, length) at the block size given
    (`SentBlocks.in_order`); `measured` says which count in the totals (default: all). None figures
    with `not_computed` saying why when there are no token-id prompts."""
    size = block_size or DEFAULT_BLOCK_SIZE
    out: dict[str, Any] = {
        "block_size": size,
        "block_size_from": "engine" if block_size else "default",
        "bound": BOUND,
    }
    if blocks is None and prompts is not None:
        blocks = [(chained_block_hashes(p, size), len(p)) for p in prompts]
    if blocks is None:
        none = dict.fromkeys(("cached_tokens", "prompt_tokens", "hit_ratio"))
        return {**out, **none, "not_computed": why_not}
    cached = implied_from_blocks(blocks, size)
    keep = list(measured) if measured is not None else [True] * len(blocks)
    hit = sum(c for c, k in zip(cached, keep, strict=True) if k)
    total = sum(n for (_, n), k in zip(blocks, keep, strict=True) if k)
    return {**out, "cached_tokens": hit, "prompt_tokens": total, "hit_ratio": _ratio(hit, total)}


def reported_facts(records: Iterable[RequestRecord], total_input_tokens: int) -> dict[str, Any]:
    """The engine's per-request `cached_tokens` over the measured ok requests (module doc)."""
    with_details = [r for r in records if not r.warmup and r.outcome == "ok" and r.cached_tokens is not None]
    cached = sum(r.cached_tokens or 0 for r in with_details)
    prompt = sum(r.input_len if r.prompt_tokens is None else r.prompt_tokens for r in with_details)
    return {
        "requests_with_details": len(with_details),
        "cached_tokens": cached if with_details else None,
        "prompt_tokens": prompt if with_details else None,
        "hit_ratio": _ratio(cached, prompt) if with_details else None,
        "cached_share_of_input": _ratio(cached, total_input_tokens) if with_details else None,
    }
