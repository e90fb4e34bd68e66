"""Paged KV cache with optional prefix caching over block-aligned token-prefix hashes.

Block accounting follows vLLM: a sequence holds private blocks for its own tokens and shared
references on cached blocks whose content hash (chained over every earlier block) matched; blocks
with no references stay cached but evictable (LRU) and count as free for usage.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Protocol


class HoldsBlocks(Protocol):
    """What the cache needs to know about a sequence."""

    private_blocks: int
    shared_hashes: list[int]


class KVCache:
    """Counts of free, private and cached blocks; no tensors."""

    def __init__(self, total_tokens: int, block_size: int, prefix_caching: bool) -> None:
        self.block_size = block_size
        self.total_blocks = max(1, total_tokens // block_size)
        self.free_blocks = self.total_blocks
        self.prefix_caching = prefix_caching
        self.refcount: dict[int, int] = {}
        self.evictable: OrderedDict[int, None] = OrderedDict()

    @property
    def available_blocks(self) -> int:
        """Blocks a new allocation can use: free plus evictable cached ones."""
        return self.free_blocks + len(self.evictable)

    @property
    def used_blocks(self) -> int:
        return self.total_blocks - self.available_blocks

    def usage(self) -> float:
        """Fraction of blocks held by running sequences (vLLM's kv_cache_usage_perc, 0..1)."""
        return self.used_blocks / self.total_blocks

    def count_hits(self, hashes: list[int], prompt_len: int) -> int:
        """Leading cached blocks of a prompt (at least one prompt token is always recomputed)."""
        if not self.prefix_caching:
            return 0
        hits = 0
        for h in hashes:
            if h not in self.refcount:
                break
            hits += 1
        return min(hits, (prompt_len - 1) // self.block_size)

    def allocate(self, seq: HoldsBlocks, hashes: list[int], hits: int, new_blocks: int) -> bool:
        """Take references on `hits` cached blocks and `new_blocks` private ones; False if no room."""
        reuse_evictable = sum(1 for h in hashes[:hits] if self.refcount.get(h) == 0)
        if new_blocks > self.available_blocks - reuse_evictable:
            return False
        for h in hashes[:hits]:
            self._ref(h)
            seq.shared_hashes.append(h)
        self._take(new_blocks)
        seq.private_blocks += new_blocks
        return True

    def grow(self, seq: HoldsBlocks, blocks: int = 1) -> bool:
        """One more block for a decoding sequence; False when the cache is full (preempt someone)."""
        if blocks > self.available_blocks:
            return False
        self._take(blocks)
        seq.private_blocks += blocks
        return True

    def commit(self, seq: HoldsBlocks, hashes: list[int]) -> None:
        """Publish a sequence's computed full prompt blocks to the prefix cache."""
        if not self.prefix_caching:
            return
        for h in hashes[len(seq.shared_hashes) :]:
            if h in self.refcount or seq.private_blocks <= 0:
                break  # another sequence published it first; keep our private copy
            seq.private_blocks -= 1
            self.refcount[h] = 1
            seq.shared_hashes.append(h)

    def free(self, seq: HoldsBlocks) -> None:
        """Release everything a sequence holds; its published blocks stay cached (evictable)."""
        for h in seq.shared_hashes:
            n = self.refcount[h] - 1
            self.refcount[h] = n
            if n == 0:
                self.evictable[h] = None
        seq.shared_hashes.clear()
        self.free_blocks += seq.private_blocks
        seq.private_blocks = 0

    def reset_prefix_cache(self) -> int:
        """Drop every unreferenced cached block; returns how many were dropped."""
        dropped = len(self.evictable)
        for h in self.evictable:
            del self.refcount[h]
        self.evictable.clear()
        self.free_blocks += dropped
        return dropped

    def _ref(self, h: int) -> None:
        n = self.refcount[h]
        if n == 0:
            del self.evictable[h]
        self.refcount[h] = n + 1

    def _take(self, n: int) -> None:
        while self.free_blocks < n:
            h, _ = self.evictable.popitem(last=False)  # least recently freed
            del self.refcount[h]
            self.free_blocks += 1
        self.free_blocks -= n
