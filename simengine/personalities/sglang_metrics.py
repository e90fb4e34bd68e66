"""SGLang's `/metrics`: `sglang:*` names, HELP texts, labels and buckets.

Two layouts. `--engine-version 0.5.14` reproduces the golden capture
(tests/fixtures/golden/sglang-0.5.14/metrics_*.txt); any other version (default `0.5.23+sim`) follows
the newer source read in `python/sglang/srt/observability/metrics_collector.py` (commit in
simengine/data/engine_metric_sources.json): request-side TTFT, E2E and token/request counters gain an
`is_streaming` label, and `prefill_effective_tokens_total` appears. Request-side series carry
`engine_type="unified", model_name`; scheduler-side series add `moe_ep_rank, pp_rank, tp_rank`.
"""

from __future__ import annotations

import os
import time

from simengine.personalities.sglang_buckets import (
    E2E_BUCKETS,
    ITL_BUCKETS,
    QUEUE_BUCKETS,
    TOKEN_BUCKETS,
    TTFT_BUCKETS,
)
from simengine.promtext import Family, Histogram, Labels, render
from simengine.request import RequestGroup, Sequence
from simengine.scheduler import Scheduler

CAPTURED_VERSION = "0.5.14"
THROUGHPUT_WINDOW_S = 5.0
EFFECTIVE_MODES = ("input", "device_hit", "host_hit", "storage_hit")
GAUGES = (
    ("max_total_num_tokens", "Maximum total number of tokens in the KV cache pool."),
    ("page_size", "KV cache page size in tokens."),
    ("num_pages", "Number of KV cache pages."),
    ("context_len", "Maximum context length."),
    ("num_running_reqs", "The number of running requests."),
    ("num_queue_reqs", "The number of requests in the waiting queue."),
    ("gen_throughput", "The generation throughput (token/s)."),
    ("cache_hit_rate", "The prefix cache hit rate."),
    ("decode_sum_seq_lens", "The sum of all sequence lengths in decode."),
    ("token_usage", "The token usage."),
    ("full_token_usage", "The token usage for full attention layers."),
    ("num_used_tokens", "The number of used tokens."),
    ("kv_available_tokens", "Number of free token slots in the KV cache pool."),
    ("kv_evictable_tokens", "Number of evictable (radix-cached) token slots in the KV cache pool."),
    ("kv_used_tokens", "Number of actively used token slots in the KV cache pool."),
    ("utilization", "The utilization."),
    ("num_retracted_reqs", "The number of retracted requests."),
)


def uses_source_layout(engine_version: str) -> bool:
    """True unless `engine_version` is the captured 0.5.14 (whose layout the golden files pin)."""
    return not engine_version.startswith(CAPTURED_VERSION)


def _c(name: str, help_text: str) -> Family:
    return Family(name, help_text, "counter", created=False)


def _h(name: str, help_text: str, buckets: tuple[float, ...]) -> Histogram:
    return Histogram(name, help_text, buckets, created=False, sum_first=True)


class SglangMetrics:
    """Holds SGLang's metric families and updates them from engine events."""

    def __init__(
        self, model_name: str, context_len: int, page_size: int, max_total_tokens: int, *, source: bool = True
    ) -> None:
        self.source = source
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
        self.gauges = {name: Family(f"sglang:{name}", text, "gauge", created=False) for name, text in GAUGES}
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
        self.retracted = _c("sglang:num_retracted_requests_total", "Total number of retracted requests.")
        self.retracted_in = _c(
            "sglang:num_retracted_input_tokens_total", "Total number of retracted input tokens."
        )
        self.retracted_out = _c(
            "sglang:num_retracted_output_tokens_total", "Total number of retracted output tokens."
        )
        self.realtime = _c(
            "sglang:realtime_tokens_total",
            "Total number of tokens processed (updated on each log interval). mode: "
            "prefill_compute, prefill_cache, decode.",
        )
        self.effective = _c(
            "sglang:prefill_effective_tokens_total",
            "Effective prefill tokens with retracted-request re-counts excluded, updated on each log "
            "interval. mode: device_hit, host_hit, storage_hit, input. Windowed prefix cache hit rate = "
            "rate(sum of *_hit) / rate(sum of all modes); per-tier rate uses a single *_hit mode in the "
            "numerator.",
        )
        self._static = {
            "max_total_num_tokens": float(max_total_tokens),
            "page_size": float(page_size),
            "num_pages": float(max_total_tokens // max(page_size, 1)),
            "context_len": float(context_len),
        }
        if source:  # SGLang pre-seeds every mode at 0 so ratio charts get a complete operand set
            for mode in EFFECTIVE_MODES:
                self.effective.inc((*self.sched_labels, ("mode", mode)), 0.0)
        self._window: list[tuple[float, int]] = []
        self._pid = str(os.getpid())

    def _req_labels(self, seq: Sequence) -> Labels:
        if not self.source:
            return self.labels
        streaming = "true" if seq.group.params.get("stream") else "false"
        return (*self.labels, ("is_streaming", streaming))

    def on_step(self, step_tokens: int) -> None:
        """Nothing per step: SGLang's per-pass series are not modelled."""

    def on_first_token(self, seq: Sequence) -> None:
        self.ttft.observe(self._req_labels(seq), (seq.first_token_ns - seq.arrival_ns) / 1e9)
        self.queue.observe(self.sched_labels, (seq.scheduled_ns - seq.arrival_ns) / 1e9)

    def on_gaps(self, gaps: dict[int, int]) -> None:
        for gap_ns, n in gaps.items():
            self.itl.observe(self.labels, gap_ns / 1e9, n)

    def on_finished(self, group: RequestGroup) -> None:
        for seq in group.seqs:
            if seq.finish_reason == "abort" or not seq.first_token_ns:
                self.aborted.inc(self.labels)
            else:
                self._on_seq_finished(seq)

    def _on_seq_finished(self, seq: Sequence) -> None:
        """SGLang's tokenizer manager counts a request's tokens when it finishes."""
        lab, req = self.labels, self._req_labels(seq)
        self.prompt_tokens.inc(req, seq.prompt_len)
        self.generation_tokens.inc(req, seq.generated)
        if seq.cached_tokens > 0:
            self.cached_tokens.inc((*lab, ("cache_source", "device")), seq.cached_tokens)
        self.num_requests.inc(req)
        self.e2e.observe(req, (seq.last_token_ns - seq.arrival_ns) / 1e9)
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
        for name, value in self._static.items():
            self.gauges[name].set(self.sched_labels, value)
        if sched.counters.steps:
            self._render_activity(sched)
        source_only = (self.effective,) if self.source else ()
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
                self.retracted,
                self.retracted_in,
                self.retracted_out,
                self.realtime,
                *source_only,
            ),
            skip_empty=True,
        )

    def _render_activity(self, sched: Scheduler) -> None:
        slab = self.sched_labels
        c = sched.counters
        kv = sched.kv
        bs = kv.block_size
        used = kv.used_blocks * bs
        values = {
            "num_running_reqs": float(len(sched.running)),
            "num_queue_reqs": float(len(sched.waiting)),
            "gen_throughput": self._gen_throughput(c.generation_tokens),
            "cache_hit_rate": c.cached_prompt_tokens / c.prefix_queries if c.prefix_queries else 0.0,
            "decode_sum_seq_lens": float(sum(s.context_len for s in sched.running)),
            "token_usage": kv.usage(),
            "full_token_usage": kv.usage(),
            "num_used_tokens": float(used),
            "kv_available_tokens": float(kv.free_blocks * bs),
            "kv_evictable_tokens": float(len(kv.evictable) * bs),
            "kv_used_tokens": float(used),
            "utilization": kv.usage(),
            "num_retracted_reqs": 0.0,
        }
        for name, value in values.items():
            labels = (*slab, ("pid", self._pid)) if name == "num_retracted_reqs" else slab
            self.gauges[name].set(labels, value)
        self.realtime.values[(*slab, ("mode", "prefill_compute"))] = float(c.computed_prompt_tokens)
        self.realtime.values[(*slab, ("mode", "decode"))] = float(c.generation_tokens)
        self.realtime.values[(*slab, ("mode", "prefill_cache"))] = float(c.cached_prompt_tokens)
        if c.preemptions:  # SGLang's retract counters appear with the first retraction
            self.retracted.values[slab] = float(c.preemptions)
            self.retracted_in.values[slab] = float(c.preempted_prompt_tokens)
            self.retracted_out.values[slab] = float(c.preempted_output_tokens)
        if self.source:
            self._render_source_counters(sched)

    def _render_source_counters(self, sched: Scheduler) -> None:
        slab = self.sched_labels
        c = sched.counters
        effective = {"input": c.prompt_tokens - c.cached_prompt_tokens, "device_hit": c.cached_prompt_tokens}
        for mode, value in effective.items():
            self.effective.values[(*slab, ("mode", mode))] = float(value)
