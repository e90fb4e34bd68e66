"""The pure prefix-cache figures: the implied infinite block cache and the reported per-request sums."""

from __future__ import annotations

import pytest

from loadgen.prefix_cache import (
    DEFAULT_BLOCK_SIZE,
    chained_block_hashes,
    implied_cached_tokens,
    implied_facts,
    reported_facts,
)
from loadgen.records import RequestRecord


def _rec(i: int, prompt: int, cached: int | None, outcome: str = "ok", warmup: bool = False) -> RequestRecord:
    r = RequestRecord(i, f"r{i}", warmup, 0, prompt, 4, prompt_tokens=prompt, cached_tokens=cached)
    r.outcome = outcome
    return r


def test_block_hashes_chain_over_every_earlier_block() -> None:
    a, b = [1, 2, 3, 4], [5, 6, 7, 8]
    assert chained_block_hashes(a + b + [9], 4)[1] == chained_block_hashes([*a, *b], 4)[1]
    assert chained_block_hashes(b + b, 4)[1] != chained_block_hashes(a + b, 4)[1]  # same block, other chain
    assert len(chained_block_hashes(a + b + [9], 4)) == 2  # the partial block is not hashed


def test_implied_counts_leading_blocks_seen_before_less_the_last_token_block() -> None:
    a, b, c = [1] * 4, [2] * 4, [3] * 4
    prompts = [a + b + [9], a + b + [8], a + c, a + b, c + a]
    # 1: cold, 0 | 2: a, b seen -> 8 | 3: a seen, c after a not -> 4
    # 4: a, b seen, but b holds the last token: (8 - 1) // 4 = 1 block -> 4 | 5: c first: a new chain -> 0
    assert implied_cached_tokens(prompts, 4) == [0, 8, 4, 4, 0]
    assert implied_cached_tokens([[5], [5]], 1) == [0, 0]  # a 1-token prompt always computes its token


def test_implied_facts_count_only_measured_requests_but_warm_with_all() -> None:
    warm, a = [1] * 16, [1] * 16 + [2]
    facts = implied_facts([warm, a], None, measured=[False, True])  # no engine block size: 16
    # the warm-up request fills the cache (one block); the measured one hits it: 16 of 17 tokens
    assert facts["cached_tokens"] == 16
    assert facts["prompt_tokens"] == 17
    assert facts["hit_ratio"] == pytest.approx(16 / 17)
    assert facts["block_size"] == DEFAULT_BLOCK_SIZE
    assert facts["block_size_from"] == "default"
    assert "upper bound" in facts["bound"]
    none = implied_facts(None, 16, why_not="text prompts")
    assert none["hit_ratio"] is None
    assert none["not_computed"] == "text prompts"
    assert none["block_size_from"] == "engine"
    with pytest.raises(ValueError, match="block size"):
        implied_cached_tokens([[1]], 0)


def test_reported_facts_over_ok_measured_requests_with_details() -> None:
    records = [
        _rec(0, 100, 80, warmup=True),  # warm-up: not measured
        _rec(1, 100, 0),
        _rec(2, 200, 150),
        _rec(3, 100, None),  # no details from the engine
        _rec(4, 100, 90, outcome="timeout"),
    ]
    facts = reported_facts(records, total_input_tokens=400)  # ok measured: 100 + 200 + 100
    assert facts["requests_with_details"] == 2
    assert facts["cached_tokens"] == 150
    assert facts["prompt_tokens"] == 300
    assert facts["hit_ratio"] == pytest.approx(0.5)  # 150 / 300
    assert facts["cached_share_of_input"] == pytest.approx(0.375)  # 150 / 400
    nothing = reported_facts([_rec(1, 100, None)], 100)
    assert nothing == {
        "requests_with_details": 0,
        "cached_tokens": None,
        "prompt_tokens": None,
        "hit_ratio": None,
        "cached_share_of_input": None,
    }


def test_run_cache_facts_redraw_the_sent_prompts_in_send_order() -> None:
    from loadgen.results.prompt_cache import run_cache_facts, sent_prompts

    class Spec:
        def __init__(self, prompt: list[int] | str) -> None:
            self.prompt = prompt

    class Redrawn:
        def request(self, index: int) -> Spec:
            return Spec([7] * 16 + [index])  # every prompt: one shared block, then its own token

    records = [_rec(i, 17, None) for i in range(3)]
    for r, sent in zip(records, (30, 10, 20), strict=True):
        r.sent_ns = sent  # sent as 1, 2, 0
    facts = run_cache_facts([None, None], records, Redrawn(), 16, total_input_tokens=51)
    # the first sent misses its block, the two after it hit it: 2 x 16 of 3 x 17
    assert (facts["implied"]["cached_tokens"], facts["implied"]["prompt_tokens"]) == (32, 51)
    assert facts["hit_ratio"] is None  # no engine counters
    assert facts["reported"]["requests_with_details"] == 0

    class Text:
        def request(self, index: int) -> Spec:
            return Spec("words")

    assert sent_prompts(Text(), records)[0] is None

    class Sessions:
        def implied_prompts(self, indices: list[int]) -> list[list[int]]:
            return [[1] * 16 + [i] for i in indices]

    assert sent_prompts(Sessions(), records[:2]) == ([[1] * 16 + [0], [1] * 16 + [1]], "")


def test_blocks_kept_as_sent_give_the_redrawn_figures() -> None:
    """SentBlocks (the blocks kept as the finisher digests each request) and the re-draw after the
    load give the same implied figures, in send order, whatever order the requests were digested in;
    a request it did not keep, or another block size, re-draws."""
    import random

    from loadgen.prefix_cache import SentBlocks
    from loadgen.results.prompt_cache import IMPLIED_MAX_TOKENS, run_cache_facts, sent_blocks
    from loadgen.workload.generator import RequestSpec

    rng = random.Random(4)
    prefixes = [[rng.randrange(100, 200) for _ in range(40)] for _ in range(3)]

    class Redrawn:
        def request(self, index: int) -> RequestSpec:
            r = random.Random(index)
            tail = [r.randrange(100, 200) for _ in range(r.randrange(1, 40))]
            return RequestSpec(index, prefixes[index % 3] + tail, 0, 4)

    workload = Redrawn()
    records = [_rec(i, 17, None, warmup=i < 2) for i in range(60)]
    for r in records:
        r.sent_ns = rng.randrange(1, 10**6)  # sent in another order than digested
    records[7].sent_ns = None  # never sent
    for size in (16, 5):
        kept = sent_blocks(workload, size)
        assert kept is not None
        for r in records:
            kept.add(workload.request(r.index))
        redrawn = run_cache_facts([None, None], records, workload, size, total_input_tokens=0)
        assert redrawn["implied"]["cached_tokens"] > 0  # shared prefixes: blocks are hit
        assert run_cache_facts([None, None], records, workload, size, 0, kept) == redrawn
    partial = SentBlocks(16, IMPLIED_MAX_TOKENS)
    for r in records[:30]:
        partial.add(workload.request(r.index))
    assert partial.in_order([r.index for r in records]) is None  # so it re-draws
    assert run_cache_facts([None, None], records, workload, 16, 0, partial) == run_cache_facts(
        [None, None], records, workload, 16, 0
    )
    other_size = SentBlocks(32, IMPLIED_MAX_TOKENS)  # every prompt's blocks, at another size: not used
    for r in records:
        other_size.add(workload.request(r.index))
    assert run_cache_facts([None, None], records, workload, 16, 0, other_size) == run_cache_facts(
        [None, None], records, workload, 16, 0
    )

    text = SentBlocks(16, IMPLIED_MAX_TOKENS)
    text.add(RequestSpec(0, "words", 1, 4))
    text.add(RequestSpec(1, [1, 2, 3], 3, 4))
    facts = run_cache_facts([None, None], records[:1], workload, 16, 0, text)
    assert facts["implied"]["cached_tokens"] is None
    assert facts["implied"]["not_computed"].startswith("text prompts")
    small = SentBlocks(16, 50)
    for i in range(3):
        small.add(RequestSpec(i, [1] * 20, 20, 4))
    assert small.why_not == "over 50 prompt tokens: not re-drawn"
    assert len(small.hashes) == 0  # what it kept is let go

    class Sessions:
        def implied_prompts(self, indices: list[int]) -> list[list[int]]:
            return [[1] * 16 + [i] for i in indices]

    assert sent_blocks(Sessions(), 16) is None  # they give their own prompts
