"""Continuous-batching scheduler: what runs in the next step, and what a finished step produced.

Pure bookkeeping with no clock and no I/O, so tests can drive it with a virtual clock. Each step
(vLLM V1 order): running sequences first (one decode token each, or their next prefill chunk), then
admission from the waiting queue while fewer than `max_num_seqs` run, the token budget
(`max_num_batched_tokens`) lasts and the KV cache has room. A decoding sequence that needs a new KV
block when the cache is full preempts the most recently admitted running sequence (its blocks are
freed and it goes back to the head of the queue, to be recomputed), as vLLM's recompute preemption does.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from infergauge.blocks import chained_block_hashes as block_hashes
from simengine.gpu import StepModel
from simengine.kvcache import KVCache
from simengine.request import FINISHED, RUNNING, WAITING, RequestGroup, Sequence


@dataclass
class Batch:
    """One step's work: (sequence, tokens computed) pairs and the model's duration for it."""

    items: list[tuple[Sequence, int]] = field(default_factory=list)
    new_tokens: int = 0
    prefill_tokens: int = 0
    context_tokens: int = 0
    attended: float = 0.0
    duration_s: float = 0.0


@dataclass
class StepOutcome:
    """What a completed step produced: sequences that got a token, groups that finished."""

    emitted: list[Sequence]
    finished_groups: list[RequestGroup]
    preempted: int = 0


@dataclass
class SchedulerCounters:
    """Engine-wide totals that the metrics of both personalities are built from."""

    prompt_tokens: int = 0  # prompt tokens of admitted requests (first admission)
    computed_prompt_tokens: int = 0  # prefill tokens actually computed (incl. recompute)
    cached_prompt_tokens: int = 0  # prompt tokens served from the prefix cache
    prefix_queries: int = 0  # prompt tokens looked up in the prefix cache
    generation_tokens: int = 0
    preemptions: int = 0
    preempted_prompt_tokens: int = 0  # prompt tokens of preempted sequences (SGLang's retracted input)
    preempted_output_tokens: int = 0  # tokens they had generated (SGLang's retracted output)
    steps: int = 0
    step_tokens: int = 0
    flops_per_gpu: float = 0.0  # the roofline model's estimate, for vllm:estimated_* counters
    read_bytes_per_gpu: float = 0.0
    write_bytes_per_gpu: float = 0.0


class Scheduler:
    """Waiting queue, running batch and KV cache of one simulated engine."""

    def __init__(
        self,
        model: StepModel,
        *,
        max_num_seqs: int,
        max_num_batched_tokens: int,
        kv_cache_tokens: int,
        block_size: int,
        chunked_prefill: bool,
        prefix_caching: bool,
    ) -> None:
        self.model = model
        self.max_num_seqs = max_num_seqs
        self.budget = max_num_batched_tokens
        self.chunked_prefill = chunked_prefill
        self.kv = KVCache(kv_cache_tokens, block_size, prefix_caching)
        self.block_size = block_size
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.counters = SchedulerCounters()

    def add(self, group: RequestGroup) -> None:
        """Queue every sequence of a new request."""
        group.remaining = len(group.seqs)
        self.waiting.extend(group.seqs)

    def has_work(self) -> bool:
        return bool(self.running or self.waiting)

    def abort(self, group: RequestGroup) -> None:
        """Drop a request (client went away): free its KV blocks, forget its sequences."""
        group.aborted = True
        for seq in group.seqs:
            if seq.state == RUNNING:
                self.running.remove(seq)
                self.kv.free(seq)
            elif seq.state == WAITING and seq in self.waiting:
                self.waiting.remove(seq)
            seq.state = FINISHED
            seq.finish_reason = seq.finish_reason or "abort"

    def max_blocks_for(self, tokens: int) -> int:
        return -(-tokens // self.block_size)

    def schedule(self, now_ns: int = 0) -> Batch | None:
        """Choose the next step's work (starting at `now_ns`); None when nothing can run."""
        batch = Batch()
        budget = self._schedule_running(batch, self.budget)
        self._admit(batch, budget, now_ns)
        if not batch.items:
            return None
        batch.duration_s = self.model.step_seconds(batch.new_tokens, batch.context_tokens, batch.attended)
        return batch

    def _schedule_running(self, batch: Batch, budget: int) -> int:
        i = 0
        running = self.running
        items = batch.items
        while i < len(running) and budget > 0:
            seq = running[i]
            if seq.num_computed >= seq.prefill_len:  # decoding: one token, needs a KV slot for it
                ctx = seq.prompt_len + seq.generated
                if ctx >= seq.kv_cap and not self._grow_or_preempt(seq, 1):
                    continue  # seq itself was preempted; the list shifted
                items.append((seq, 1))
                batch.new_tokens += 1
                batch.context_tokens += ctx
                batch.attended += ctx + 1
                budget -= 1
            else:
                chunk = min(seq.prefill_len - seq.num_computed, budget)
                self._add_item(batch, seq, chunk, seq.num_computed)
                budget -= chunk
            i += 1
        return budget

    def _grow_or_preempt(self, seq: Sequence, need: int) -> bool:
        while not self.kv.grow(seq, need):
            victim = self.running[-1]
            self._preempt(victim)
            if victim is seq:
                return False
        seq.kv_cap += need * self.block_size
        return True

    def _preempt(self, seq: Sequence) -> None:
        self.running.remove(seq)
        self.kv.free(seq)
        seq.kv_cap = 0
        seq.state = WAITING
        seq.num_computed = 0
        seq.prefill_len = seq.context_len  # recompute prompt + generated tokens
        seq.preemptions += 1
        c = self.counters
        c.preemptions += 1
        c.preempted_prompt_tokens += seq.prompt_len
        c.preempted_output_tokens += seq.generated
        self.waiting.appendleft(seq)

    def _admit(self, batch: Batch, budget: int, now_ns: int) -> None:
        while self.waiting and budget > 0 and len(self.running) < self.max_num_seqs:
            seq = self.waiting[0]
            if self.kv.prefix_caching and not seq.hashes:
                seq.hashes = block_hashes(seq.prompt_ids, self.block_size)
            hits = self.kv.count_hits(seq.hashes, seq.prefill_len)
            remaining = seq.prefill_len - hits * self.block_size
            if not self.chunked_prefill and remaining > budget and batch.items:
                return  # without chunked prefill a prompt is computed in one step
            new_blocks = self.max_blocks_for(seq.prefill_len + 1) - hits
            if not self.kv.allocate(seq, seq.hashes, hits, new_blocks):
                return  # KV cache full: wait for running sequences to finish
            self.waiting.popleft()
            seq.kv_cap = (hits + new_blocks) * self.block_size
            self._start(seq, hits * self.block_size, now_ns)
            chunk = remaining if not self.chunked_prefill else min(remaining, budget)
            self._add_item(batch, seq, chunk, seq.num_computed)
            budget -= chunk

    def _start(self, seq: Sequence, cached: int, now_ns: int) -> None:
        c = self.counters
        if seq.preemptions == 0:
            seq.scheduled_ns = now_ns
            c.prompt_tokens += seq.prompt_len
            c.prefix_queries += seq.prompt_len
            c.cached_prompt_tokens += cached
            seq.cached_tokens = cached
        seq.state = RUNNING
        seq.num_computed = cached
        self.running.append(seq)

    def _add_item(self, batch: Batch, seq: Sequence, n: int, start: int) -> None:
        batch.items.append((seq, n))
        batch.new_tokens += n
        batch.context_tokens += start
        batch.attended += n * start + n * (n + 1) / 2
        if seq.num_computed < seq.prefill_len:
            batch.prefill_tokens += n

    def complete(self, batch: Batch, now_ns: int) -> StepOutcome:
        """Apply a finished step at time `now_ns`: advance prefill, emit tokens, finish sequences."""
        emitted: list[Sequence] = []
        finished: list[RequestGroup] = []
        c = self.counters
        c.steps += 1
        c.step_tokens += batch.new_tokens
        flops, read, written = self.model.step_costs(batch.new_tokens, batch.context_tokens, batch.attended)
        c.flops_per_gpu += flops
        c.read_bytes_per_gpu += read
        c.write_bytes_per_gpu += written
        for seq, n in batch.items:
            if seq.state != RUNNING:
                continue  # aborted while the step ran
            was_prefill = seq.num_computed < seq.prefill_len
            seq.num_computed += n
            if was_prefill:
                c.computed_prompt_tokens += n
                if seq.num_computed < seq.prefill_len:
                    continue  # more prefill chunks to go
                self.kv.commit(seq, seq.hashes)
            self._emit(seq, now_ns)
            emitted.append(seq)
            if seq.generated >= seq.target_len:
                self._finish(seq, finished)
        return StepOutcome(emitted, finished)

    def _emit(self, seq: Sequence, now_ns: int) -> None:
        seq.generated += 1
        self.counters.generation_tokens += 1
        seq.prev_token_ns = seq.last_token_ns
        seq.last_token_ns = now_ns
        if seq.first_token_ns == 0:
            seq.first_token_ns = now_ns

    def _finish(self, seq: Sequence, finished: list[RequestGroup]) -> None:
        seq.finish_reason = "length" if seq.generated >= seq.max_tokens else "stop"
        seq.state = FINISHED
        self.running.remove(seq)
        self.kv.free(seq)
        group = seq.group
        group.remaining -= 1
        if group.remaining == 0:
            finished.append(group)
