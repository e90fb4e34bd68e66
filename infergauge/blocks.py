"""Prefix-cache blocks as vLLM keys them: the chained hash of each full block of token ids.

One definition for the simulated engine's cache (simengine/kvcache.py) and for the hit ratio a
workload implies (loadgen/prefix_cache.py), so the two count the same blocks. Standard library only.
"""

from __future__ import annotations

from collections.abc import Sequence


def chained_block_hashes(token_ids: Sequence[int], block_size: int) -> list[int]:
    """Hash of each full block, chained: h_i = hash((h_{i-1}, block i's token ids)); a partial last
    block has none (a cache can only hold full blocks)."""
    out: list[int] = []
    prev = 0
    for start in range(0, len(token_ids) - block_size + 1, block_size):
        prev = hash((prev, tuple(token_ids[start : start + block_size])))
        out.append(prev)
    return out
