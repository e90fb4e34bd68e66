"""Run the scheduler on a virtual clock: the model's numbers without real time or sockets.

Used by the tests of the behaviour model (saturation, queueing, prefix caching, interconnect) and by
the README's figures; the real server runs the very same `Scheduler` on the wall clock.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable
from dataclasses import dataclass

from simengine.config import SimConfig
from simengine.gpu import StepModel
from simengine.request import RequestGroup, Sequence
from simengine.scheduler import Scheduler

PromptFn = Callable[[int], list[int]]
# KV accounting and prefix matching work in blocks of at least this many tokens: SGLang's page size 1
# (token-level radix matching) would otherwise cost one hash and one dict entry per cached token.
MIN_BLOCK_TOKENS = 16


def build_scheduler(cfg: SimConfig) -> Scheduler:
    """The scheduler a `SimConfig` describes."""
    model = StepModel.build(
        cfg.gpu,
        cfg.model_params,
        cfg.dtype,
        cfg.tensor_parallel_size,
        cfg.interconnect,
        cfg.step_overhead_ms,
        cfg.speed_factor,
    )
    return Scheduler(
        model,
        max_num_seqs=cfg.max_num_seqs,
        max_num_batched_tokens=cfg.max_num_batched_tokens,
        kv_cache_tokens=cfg.kv_cache_tokens,
        block_size=max(cfg.block_size, MIN_BLOCK_TOKENS),
        chunked_prefill=cfg.enable_chunked_prefill,
        prefix_caching=cfg.enable_prefix_caching,
    )


@dataclass(frozen=True)
class VirtualResult:
    """Figures of one virtual run (seconds of model time)."""

    completed: int
    output_tokens_per_s: float
    requests_per_s: float
    ttft_mean_s: float
    ttft_p99_s: float
    preemptions: int


def random_prompt(seed: int, length: int) -> PromptFn:
    """Distinct random prompts of `length` tokens (no shared prefix)."""
    rng = random.Random(seed)
    return lambda i: [rng.randrange(2, 100_000) for _ in range(length)]


def shared_prefix_prompt(seed: int, prefix_len: int, suffix_len: int) -> PromptFn:
    """Prompts that share one `prefix_len`-token system prompt, then differ."""
    rng = random.Random(seed)
    prefix = [rng.randrange(2, 100_000) for _ in range(prefix_len)]
    return lambda i: prefix + [rng.randrange(2, 100_000) for _ in range(suffix_len)]


def _new_group(i: int, prompt: list[int], output_len: int, now_ns: int) -> RequestGroup:
    group = RequestGroup(f"v{i}", None, now_ns, 0, {})
    group.seqs.append(Sequence(group, 0, prompt, output_len, output_len, i))
    return group


def run_closed_loop(
    cfg: SimConfig,
    *,
    concurrency: int,
    prompt: PromptFn,
    output_len: int,
    duration_s: float,
    warmup_s: float = 0.0,
) -> VirtualResult:
    """`concurrency` clients, each sending its next request as soon as the previous one finishes."""
    sched = build_scheduler(cfg)
    return _drive(sched, prompt, output_len, duration_s, warmup_s, concurrency=concurrency, rate=0.0)


def run_open_loop(
    cfg: SimConfig, *, rate: float, prompt: PromptFn, output_len: int, duration_s: float
) -> VirtualResult:
    """Requests arrive at a fixed `rate` per second whatever the engine does (queueing shows)."""
    sched = build_scheduler(cfg)
    return _drive(sched, prompt, output_len, duration_s, 0.0, concurrency=0, rate=rate)


def _drive(
    sched: Scheduler,
    prompt: PromptFn,
    output_len: int,
    duration_s: float,
    warmup_s: float,
    *,
    concurrency: int,
    rate: float,
) -> VirtualResult:
    now = 0
    end = int((warmup_s + duration_s) * 1e9)
    warm = int(warmup_s * 1e9)
    n = 0
    next_arrival = 0
    ttfts: list[float] = []
    tokens = done = 0
    for _ in range(concurrency):
        sched.add(_new_group(n, prompt(n), output_len, now))
        n += 1
    while now < end:
        if rate > 0:
            while next_arrival <= now:
                sched.add(_new_group(n, prompt(n), output_len, next_arrival))
                n += 1
                next_arrival += int(1e9 / rate)
        batch = sched.schedule(now)
        if batch is None:
            now = next_arrival if rate > 0 else end
            continue
        now += int(batch.duration_s * 1e9)
        out = sched.complete(batch, now)
        if now >= warm:
            tokens += len(out.emitted)
        for seq in out.emitted:
            if seq.generated == 1 and seq.arrival_ns >= warm:
                ttfts.append((seq.first_token_ns - seq.arrival_ns) / 1e9)
        for _g in out.finished_groups:
            if now >= warm:
                done += 1
            if concurrency:
                sched.add(_new_group(n, prompt(n), output_len, now))
                n += 1
    ttfts.sort()
    p99 = ttfts[min(len(ttfts) - 1, int(0.99 * len(ttfts)))] if ttfts else 0.0
    return VirtualResult(
        done,
        tokens / duration_s,
        done / duration_s,
        statistics.fmean(ttfts) if ttfts else 0.0,
        p99,
        sched.counters.preemptions,
    )
