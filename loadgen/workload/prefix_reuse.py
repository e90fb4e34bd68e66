"""Prefix-cache hits a workload implies on a cold cache: what its own repeated prefixes explain.

    implied_hit_tokens(specs)   # shared-prefix: (n - groups) * shared_prefix_len, to a block

Model: an engine with an unbounded prefix cache that starts empty and caches whole blocks
(`BLOCK_TOKENS`, vLLM's default block size) serves, for each request in send order, the leading
blocks some earlier request already sent. Token-id prompts are cut into blocks of ids; text
prompts (system prompt + text, or chat messages) into blocks of characters, counted as tokens in
the request's own tokens-per-character ratio. Pure: no clock, no I/O. Block granularity makes
this a slight under-estimate of what an engine with smaller pages (SGLang's page 1) can hit.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from loadgen.workload.generator import RequestSpec

BLOCK_TOKENS = 16
BLOCK_CHARS = 64  # text blocks: about 16 tokens of English text


def _sent(spec: RequestSpec) -> Sequence[int] | str:
    """The prompt as the engine reads it: ids, or the text a completion or chat request carries."""
    if spec.messages:
        return "\n".join(str(m.get("content", "")) for m in spec.messages)
    if isinstance(spec.prompt, list) and spec.system is None:
        return spec.prompt
    text = spec.prompt if isinstance(spec.prompt, str) else " ".join(map(str, spec.prompt))
    return f"{spec.system}\n\n{text}" if spec.system is not None else text


def _leading_seen(blocks: Iterable[Sequence[int] | str], seen: set[int]) -> tuple[int, int]:
    """(leading blocks already in `seen`, blocks in all); every block's chained hash is added."""
    chained, hit, total, leading = 0, 0, 0, True
    for block in blocks:
        chained = hash((chained, tuple(block) if not isinstance(block, str) else block))
        total += 1
        if leading and chained in seen:
            hit += 1
        else:
            leading = False
        seen.add(chained)
    return hit, total


def implied_hit_tokens(specs: Iterable[RequestSpec]) -> int:
    """Prompt tokens a cold, unbounded block cache would serve from the workload's own repeats."""
    seen: set[int] = set()
    implied = 0.0
    for spec in specs:
        prompt = _sent(spec)
        size = BLOCK_CHARS if isinstance(prompt, str) else BLOCK_TOKENS
        whole = len(prompt) - len(prompt) % size  # a partial last block is never cached
        hit, _total = _leading_seen((prompt[i : i + size] for i in range(0, whole, size)), seen)
        if isinstance(prompt, str):
            implied += hit * size * (spec.input_len / len(prompt) if prompt else 0.0)
        else:
            implied += hit * size
    return round(implied)
