"""Continuous batching, KV-cache admission, chunked prefill, preemption and prefix caching."""

from __future__ import annotations

from infergauge.blocks import chained_block_hashes as block_hashes
from simengine.config import parse_args
from simengine.kvcache import KVCache
from simengine.request import FINISHED, RequestGroup, Sequence
from simengine.scheduler import Scheduler
from simengine.virtual import build_scheduler


def _group(i: int, prompt: list[int], out: int) -> RequestGroup:
    g = RequestGroup(f"r{i}", None, 0, 0, {})
    g.seqs.append(Sequence(g, 0, prompt, out, out, i))
    return g


def _sched(*flags: str) -> Scheduler:
    return build_scheduler(parse_args(list(flags)))


def test_admission_is_bounded_by_max_num_seqs() -> None:
    s = _sched("--max-num-seqs", "4")
    for i in range(10):
        s.add(_group(i, list(range(100 + i * 1000, 120 + i * 1000)), 8))
    batch = s.schedule()
    assert batch is not None
    assert len(s.running) == 4
    assert len(s.waiting) == 6
    assert len(batch.items) == 4


def test_chunked_prefill_respects_the_token_budget() -> None:
    s = _sched("--max-num-batched-tokens", "512")
    s.add(_group(0, list(range(2, 1302)), 4))  # 1300-token prompt: 512 + 512 + 276
    chunks = []
    for _ in range(3):
        batch = s.schedule()
        assert batch is not None
        chunks.append(batch.new_tokens)
        out = s.complete(batch, 1)
    assert chunks == [512, 512, 276]
    assert [seq.generated for seq in out.emitted] == [1]  # the last chunk yields the first token


def test_without_chunked_prefill_a_prompt_runs_in_one_step() -> None:
    s = _sched("--no-enable-chunked-prefill", "--max-num-batched-tokens", "512")
    s.add(_group(0, list(range(2, 1302)), 4))
    batch = s.schedule()
    assert batch is not None
    assert batch.new_tokens == 1300


def test_decode_adds_one_token_per_running_sequence_per_step() -> None:
    s = _sched()
    for i in range(3):
        s.add(_group(i, list(range(i * 100, i * 100 + 10)), 5))
    s.complete(s.schedule() or _fail(), 1)  # prefill step: first tokens
    batch = s.schedule()
    assert batch is not None
    assert [n for _, n in batch.items] == [1, 1, 1]
    out = s.complete(batch, 2)
    assert [seq.generated for seq in out.emitted] == [2, 2, 2]


def _fail() -> object:
    raise AssertionError("expected a batch")


def test_requests_finish_with_length_and_free_their_blocks() -> None:
    s = _sched()
    s.add(_group(0, list(range(2, 40)), 3))
    finished = []
    for t in range(10):
        batch = s.schedule()
        if batch is None:
            break
        finished += s.complete(batch, t).finished_groups
    assert len(finished) == 1
    seq = finished[0].seqs[0]
    assert (seq.state, seq.generated, seq.finish_reason) == (FINISHED, 3, "length")
    assert s.kv.usage() == 0.0


def test_preemption_when_the_kv_cache_runs_out() -> None:
    # 64 tokens of KV (4 blocks of 16): two 20-token prompts fit, then decoding needs more blocks
    s = _sched(
        "--kv-cache-tokens", "64", "--max-model-len", "64", "--block-size", "16", "--no-enable-prefix-caching"
    )
    s.add(_group(0, list(range(100, 120)), 40))
    s.add(_group(1, list(range(200, 220)), 40))
    for t in range(200):
        batch = s.schedule()
        if batch is None:
            break
        s.complete(batch, t)
    assert s.counters.preemptions >= 1
    assert not s.running
    assert not s.waiting


def test_prefix_cache_hits_skip_prefill_of_cached_blocks() -> None:
    s = _sched("--block-size", "16")
    shared = list(range(1000, 1160))  # 160 tokens = 10 full blocks
    s.add(_group(0, [*shared, 1, 2, 3], 2))
    while (b := s.schedule()) is not None:
        s.complete(b, 1)
    s.add(_group(1, [*shared, 7, 8, 9], 2))
    batch = s.schedule()
    assert batch is not None
    assert batch.new_tokens == 3
    assert s.counters.cached_prompt_tokens == 160


def test_prefix_cache_off_computes_everything() -> None:
    s = _sched("--no-enable-prefix-caching")
    shared = list(range(1000, 1160))
    s.add(_group(0, [*shared, 1], 2))
    while (b := s.schedule()) is not None:
        s.complete(b, 1)
    s.add(_group(1, [*shared, 2], 2))
    batch = s.schedule()
    assert batch is not None
    assert batch.new_tokens == 161


def test_kv_block_hashes_chain_over_prefixes() -> None:
    a = block_hashes([1, 2, 3, 4, 5, 6, 7, 8, 9], 4)
    b = block_hashes([1, 2, 3, 4, 5, 6, 7, 0, 9], 4)
    assert len(a) == 2
    assert a[0] == b[0]
    assert a[1] != b[1]


def test_kv_evicts_least_recently_freed_cached_blocks_and_resets() -> None:
    kv = KVCache(total_tokens=64, block_size=16, prefix_caching=True)

    class Holder:
        def __init__(self) -> None:
            self.private_blocks = 0
            self.shared_hashes: list[int] = []

    a = Holder()
    hashes = block_hashes(list(range(48)), 16)
    assert kv.allocate(a, hashes, 0, 3)
    kv.commit(a, hashes)
    kv.free(a)
    assert kv.usage() == 0.0
    assert len(kv.evictable) == 3
    assert kv.count_hits(hashes, 49) == 3
    b = Holder()
    assert kv.allocate(b, [], 0, 3)  # needs evictions: 1 free + 2 evicted, oldest first
    assert kv.count_hits(hashes, 49) == 0
    assert len(kv.evictable) == 1
    assert kv.reset_prefix_cache() == 1
    assert not kv.evictable


def test_admission_waits_for_kv_room() -> None:
    # 96 tokens of KV: a 60-token prompt takes 4 blocks (61 slots), the next 60-token one must wait
    s = _sched(
        "--kv-cache-tokens", "96", "--max-model-len", "96", "--block-size", "16", "--no-enable-prefix-caching"
    )
    s.add(_group(0, list(range(100, 160)), 2))
    s.add(_group(1, list(range(200, 260)), 2))
    s.schedule()
    assert len(s.running) == 1
    assert len(s.waiting) == 1
    for t in range(10):
        batch = s.schedule()
        if batch is None:
            break
        s.complete(batch, t)
    assert not s.waiting  # admitted once the first one finished and freed its blocks
