"""SGLang's `/metrics`: `sglang:*` names, HELP texts, labels and buckets as SGLang 0.5.14 exposes them.

Pinned against tests/fixtures/golden/sglang-0.5.14/metrics_*.txt. Request-side series carry
`engine_type="unified", model_name`; scheduler-side series add `moe_ep_rank, pp_rank, tp_rank`.
"""

from __future__ import annotations

import os
import time

from simengine.promtext import Family, Histogram, Labels, render
from simengine.request import RequestGroup, Sequence
from simengine.scheduler import Scheduler

TTFT_BUCKETS = (
    0.1,
    0.2,
    0.4,
    0.6,
    0.8,
    1.0,
    2.0,
    4.0,
    6.0,
    8.0,
    10.0,
    20.0,
    40.0,
    60.0,
    80.0,
    100.0,
    200.0,
    400.0,
)
ITL_BUCKETS = (
    0.002,
    0.004,
    0.006,
    0.008,
    0.01,
    0.015,
    0.02,
    0.025,
    0.03,
    0.035,
    0.04,
    0.06,
    0.08,
    0.1,
    0.2,
    0.4,
    0.6,
    0.8,
    1.0,
    2.0,
    4.0,
    6.0,
    8.0,
)
E2E_BUCKETS = (*TTFT_BUCKETS, 600.0, 1200.0, 1800.0, 2400.0)
TOKEN_BUCKETS = (
    100,
    300,
    500,
    700,
    1000,
    1500,
    2000,
    3000,
    4000,
    5000,
    6000,
    7000,
    8000,
    9000,
    10000,
    12500,
    15000,
    17500,
    20000,
    22500,
    25000,
    27500,
    30000,
    35000,
    40000,
    60000,
    80000,
    100000,
    200000,
    300000,
    400000,
    600000,
    800000,
    1000000,
    1100000,
)
QUEUE_BUCKETS = (
    0.0,
    0.001,
    0.005,
    0.01,
    0.05,
    0.1,
    0.2,
    0.5,
    1.0,
    2.0,
    3.0,
    4.0,
    5.0,
    10.0,
    15.0,
    20.0,
    30.0,
    40.0,
    50.0,
    60.0,
    70.0,
    80.0,
    90.0,
    100.0,
    200.0,
    300.0,
    400.0,
    500.0,
    600.0,
    700.0,
    800.0,
    900.0,
    1000.0,
    1200.0,
    1400.0,
    1600.0,
    1800.0,
    2000.0,
    2500.0,
    3000.0,
)
THROUGHPUT_WINDOW_S = 5.0


def _c(name: str, help_text: str) -> Family:
    return Family(name, help_text, "counter", created=False)


def _g(name: str, help_text: str) -> Family:
    return Family(name, help_text, "gauge", created=False)


def _h(name: str, help_text: str, buckets: tuple[float, ...]) -> Histogram:
    return Histogram(name, help_text, buckets, created=False, sum_first=True)


class SglangMetrics:
    """Holds SGLang's metric families and updates them from engine events."""

    def __init__(self, model_name: str, context_len: int, page_size: int, max_total_tokens: int) -> None:
        self.labels: Labels = (("engine_type", "unified"), ("model_name", model_name))
        self.sched_labels: Labels = (*self.labels, ("moe_ep_rank", "0"), ("pp_rank", "0"), ("tp_rank", "0"))
        self.prompt_tokens = _c("sglang:prompt_tokens_total", "Number of prefill tokens processed.")
        self.generation_tokens = _c(
            "sglang:generation_tokens_total", "Number of generation tokens processed."
        )
        self.num_requests = _c("sglang:num_requests_total", "Number of requests processed.")
        self.cached_tokens = _c(
            "sglang:cached_tokens_total", "Number of cached prompt tokens by source (device/host/storage)."
        )
        self.aborted = _c("sglang:num_aborted_requests_total", "Number of requests aborted.")
        self.gauges: dict[str, Family] = {}
        for name, help_text in (
            ("max_total_num_tokens", "Maximum total number of tokens in the KV cache pool."),
            ("page_size", "KV cache page size in tokens."),
            ("context_len", "Maximum context length."),
            ("num_running_reqs", "The number of running requests."),
            ("num_queue_reqs", "The number of requests in the waiting queue."),
            ("gen_throughput", "The generation throughput (token/s)."),
            ("cache_hit_rate", "The prefix cache hit rate."),
            ("decode_sum_seq_lens", "The sum of all sequence lengths in decode."),
            ("token_usage", "The token usage."),
            ("num_used_tokens", "The number of used tokens."),
            ("kv_available_tokens", "Number of free token slots in the KV cache pool."),
            ("kv_evictable_tokens", "Number of evictable (radix-cached) token slots in the KV cache pool."),
            ("kv_used_tokens", "Number of actively used token slots in the KV cache pool."),
            ("utilization", "The utilization."),
            ("num_retracted_reqs", "The number of retracted requests."),
        ):
            self.gauges[name] = _g(f"sglang:{name}", help_text)
        self.ttft = _h(
            "sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.", TTFT_BUCKETS
        )
        self.itl = _h(
            "sglang:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", ITL_BUCKETS
        )
        self.e2e = _h(
            "sglang:e2e_request_latency_seconds",
            "Histogram of End-to-end request latency in seconds",
            E2E_BUCKETS,
        )
        self.prompt_hist = _h(
            "sglang:prompt_tokens_histogram", "Histogram of prompt token length.", TOKEN_BUCKETS
        )
        self.uncached_hist = _h(
            "sglang:uncached_prompt_tokens_histogram",
            "Histogram of uncached (compute) prompt token length.",
            TOKEN_BUCKETS,
        )
        self.gen_hist = _h(
            "sglang:generation_tokens_histogram", "Histogram of generation token length.", TOKEN_BUCKETS
        )
        self.queue = _h("sglang:queue_time_seconds", "Histogram of queueing time in seconds.", QUEUE_BUCKETS)
        self.realtime = _c(
            "sglang:realtime_tokens_total",
            "Total number of tokens processed (updated on each log interval). mode: "
            "prefill_compute, prefill_cache, decode.",
        )
        self._static = {
            "max_total_num_tokens": float(max_total_tokens),
            "page_size": float(page_size),
            "context_len": float(context_len),
        }
        self._window: list[tuple[float, int]] = []
        self._pid = str(os.getpid())

    def on_step(self, step_tokens: int) -> None:
        """Nothing per step: SGLang's per-pass series are not modelled."""

    def on_first_token(self, seq: Sequence) -> None:
        self.ttft.observe(self.labels, (seq.first_token_ns - seq.arrival_ns) / 1e9)
        self.queue.observe(self.sched_labels, (seq.scheduled_ns - seq.arrival_ns) / 1e9)

    def on_gaps(self, gaps: dict[int, int]) -> None:
        for gap_ns, n in gaps.items():
            self.itl.observe(self.labels, gap_ns / 1e9, n)

    def on_finished(self, group: RequestGroup) -> None:
        for seq in group.seqs:
            lab = self.labels
            if seq.finish_reason == "abort" or not seq.first_token_ns:
                self.aborted.inc(lab)
                continue
            self.num_requests.inc(lab)
            self.e2e.observe(lab, (seq.last_token_ns - seq.arrival_ns) / 1e9)
            self.prompt_hist.observe(lab, seq.prompt_len)
            self.uncached_hist.observe(lab, seq.prompt_len - seq.cached_tokens)
            self.gen_hist.observe(lab, seq.generated)

    def _gen_throughput(self, generated: int) -> float:
        now = time.monotonic()
        self._window.append((now, generated))
        while len(self._window) > 2 and now - self._window[0][0] > THROUGHPUT_WINDOW_S:
            self._window.pop(0)
        t0, g0 = self._window[0]
        return (generated - g0) / (now - t0) if now > t0 else 0.0

    def render(self, sched: Scheduler) -> bytes:
        """Exposition text; like SGLang's multiprocess collector, series appear once they have data."""
        c = sched.counters
        for name, value in self._static.items():
            self.gauges[name].set(self.sched_labels, value)
        if c.steps:
            self._render_activity(sched)
        return render(
            (
                self.prompt_tokens,
                self.generation_tokens,
                self.num_requests,
                self.cached_tokens,
                self.aborted,
                *self.gauges.values(),
                self.ttft,
                self.itl,
                self.e2e,
                self.prompt_hist,
                self.uncached_hist,
                self.gen_hist,
                self.queue,
                self.realtime,
            ),
            skip_empty=True,
        )

    def _render_activity(self, sched: Scheduler) -> None:
        lab, slab = self.labels, self.sched_labels
        c = sched.counters
        kv = sched.kv
        bs = kv.block_size
        self.prompt_tokens.values[lab] = float(c.prompt_tokens)
        self.generation_tokens.values[lab] = float(c.generation_tokens)
        self.cached_tokens.values[(*lab, ("cache_source", "device"))] = float(c.cached_prompt_tokens)
        used = kv.used_blocks * bs
        values = {
            "num_running_reqs": float(len(sched.running)),
            "num_queue_reqs": float(len(sched.waiting)),
            "gen_throughput": self._gen_throughput(c.generation_tokens),
            "cache_hit_rate": c.cached_prompt_tokens / c.prefix_queries if c.prefix_queries else 0.0,
            "decode_sum_seq_lens": float(sum(s.context_len for s in sched.running)),
            "token_usage": kv.usage(),
            "num_used_tokens": float(used),
            "kv_available_tokens": float(kv.free_blocks * bs),
            "kv_evictable_tokens": float(len(kv.evictable) * bs),
            "kv_used_tokens": float(used),
            "utilization": kv.usage(),
            "num_retracted_reqs": 0.0,
        }
        for name, value in values.items():
            self.gauges[name].set(
                (*slab, ("pid", self._pid)) if name == "num_retracted_reqs" else slab, value
            )
        self.realtime.values[(*slab, ("mode", "prefill_compute"))] = float(c.computed_prompt_tokens)
        self.realtime.values[(*slab, ("mode", "decode"))] = float(c.generation_tokens)
        self.realtime.values[(*slab, ("mode", "prefill_cache"))] = float(c.cached_prompt_tokens)
