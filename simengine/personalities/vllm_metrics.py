"""vLLM's `/metrics`: names, types, HELP texts, labels and buckets.

Pinned against tests/fixtures/golden/vllm-0.26.0/metrics_*.txt (`--engine-version 0.26.0`) and against the
newer `vllm/v1/metrics/loggers.py` + `worker.py` (commit in simengine/data/engine_metric_sources.json;
any other version, default `0.33.0+sim`), which defines the same families plus three worker-timing
histograms that exist, without series, until worker timing samples are recorded. Labels `engine="0"`,
`model_name`.
"""

from __future__ import annotations

from typing import Any

from simengine.personalities.vllm_buckets import (
    ITERATION_BUCKETS,
    ITL_BUCKETS,
    LATENCY_BUCKETS,
    TTFT_BUCKETS,
    WORKER_TIME_BUCKETS,
)
from simengine.promtext import Family, Histogram, Labels, render
from simengine.request import RequestGroup, Sequence
from simengine.scheduler import Scheduler

FINISH_REASONS = ("stop", "length", "abort", "error", "repetition")
CAPTURED_VERSION = "0.26.0"
PADDED = " The num_model_tokens label is the target-model input size after padding."


def uses_source_layout(engine_version: str) -> bool:
    """True unless `engine_version` is the captured 0.26.0 (whose layout the golden files pin)."""
    return not engine_version.startswith(CAPTURED_VERSION)


def build_1_2_5_buckets(max_value: int) -> list[int]:
    """1, 2, 5, 10, 20, 50, ... up to `max_value` (vLLM's token-count buckets)."""
    out: list[int] = []
    exp = 1
    while True:
        for m in (1, 2, 5):
            if m * exp > max_value:
                return out
            out.append(m * exp)
        exp *= 10


def _c(name: str, help_text: str) -> Family:
    return Family(name, help_text, "counter", created=True)


def _g(name: str, help_text: str) -> Family:
    return Family(name, help_text, "gauge", created=False)


def _h(name: str, help_text: str, buckets: Any) -> Histogram:
    return Histogram(name, help_text, buckets, created=True, sum_first=False)


class VllmMetrics:
    """Holds vLLM's metric families and updates them from engine events."""

    def __init__(
        self, model_name: str, max_model_len: int, cache_info: dict[str, str], *, source: bool = True
    ) -> None:
        self.labels: Labels = (("engine", "0"), ("model_name", model_name))
        # vllm/v1/metrics/worker.py: registered at start-up, series only once timing samples exist
        self.worker: tuple[Histogram, ...] = (
            (
                _h(
                    "vllm:worker_model_execute_time_seconds",
                    "Device time spent on a model step, including sampling and excluding speculative "
                    "proposal time." + PADDED,
                    WORKER_TIME_BUCKETS,
                ),
                _h(
                    "vllm:worker_spec_decode_proposer_time_seconds",
                    "Device time spent generating speculative proposals.",
                    WORKER_TIME_BUCKETS,
                ),
                _h(
                    "vllm:worker_step_time_seconds",
                    "Total model-runner device time, including speculative proposals." + PADDED,
                    WORKER_TIME_BUCKETS,
                ),
            )
            if source
            else ()
        )
        tok = build_1_2_5_buckets(max_model_len)
        mfu = " (for Model Flops Utilization calculations)."
        self.est_flops = _c(
            "vllm:estimated_flops_per_gpu_total",
            "Estimated number of floating point operations per GPU" + mfu,
        )
        self.est_read = _c(
            "vllm:estimated_read_bytes_per_gpu_total",
            "Estimated number of bytes read from memory per GPU" + mfu,
        )
        self.est_write = _c(
            "vllm:estimated_write_bytes_per_gpu_total",
            "Estimated number of bytes written to memory per GPU" + mfu,
        )
        self.sleep_state = _g(
            "vllm:engine_sleep_state",
            "Engine sleep state; awake = 0 means engine is sleeping; awake = 1 means engine is awake; "
            "weights_offloaded = 1 means sleep level 1; discard_all = 1 means sleep level 2.",
        )
        self.ext_queries = _c(
            "vllm:external_prefix_cache_queries_total",
            "External prefix cache queries from KV connector cross-instance cache sharing, in terms of "
            "number of queried tokens.",
        )
        self.ext_hits = _c(
            "vllm:external_prefix_cache_hits_total",
            "External prefix cache hits from KV connector cross-instance cache sharing, in terms of "
            "number of cached tokens.",
        )
        self.mm_queries = _c(
            "vllm:mm_cache_queries_total", "Multi-modal cache queries, in terms of number of queried items."
        )
        self.mm_hits = _c(
            "vllm:mm_cache_hits_total", "Multi-modal cache hits, in terms of number of cached items."
        )
        self.running = _g("vllm:num_requests_running", "Number of requests in model execution batches.")
        self.waiting = _g("vllm:num_requests_waiting", "Number of requests waiting to be processed.")
        self.waiting_by_reason = _g(
            "vllm:num_requests_waiting_by_reason",
            "Number of waiting requests by reason. Reason labels: 'capacity' = waiting for scheduling "
            "capacity; 'deferred' = deferred by transient constraints (LoRA budget, KV transfer, blocked "
            "status). Sum of all reasons equals vllm:num_requests_waiting.",
        )
        self.kv_usage = _g("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.")
        self.prefix_queries = _c(
            "vllm:prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens."
        )
        self.prefix_hits = _c(
            "vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens."
        )
        self.preemptions = _c(
            "vllm:num_preemptions_total", "Cumulative number of preemption from the engine."
        )
        self.prompt_tokens = _c("vllm:prompt_tokens_total", "Number of prefill tokens processed.")
        self.prompt_by_source = _c("vllm:prompt_tokens_by_source_total", "Number of prompt tokens by source.")
        self.prompt_cached = _c(
            "vllm:prompt_tokens_cached_total", "Number of cached prompt tokens (local + external)."
        )
        self.generation_tokens = _c("vllm:generation_tokens_total", "Number of generation tokens processed.")
        self.success = _c("vllm:request_success_total", "Count of successfully processed requests.")
        self.req_prompt = _h("vllm:request_prompt_tokens", "Number of prefill tokens processed.", tok)
        self.req_gen = _h("vllm:request_generation_tokens", "Number of generation tokens processed.", tok)
        self.iteration = _h(
            "vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.", ITERATION_BUCKETS
        )
        self.max_gen = _h(
            "vllm:request_max_num_generation_tokens",
            "Histogram of maximum number of requested generation tokens.",
            tok,
        )
        self.params_n = _h(
            "vllm:request_params_n", "Histogram of the n request parameter.", (1, 2, 5, 10, 20)
        )
        self.params_max_tokens = _h(
            "vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter.", tok
        )
        self.ttft = _h(
            "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", TTFT_BUCKETS
        )
        self.itl = _h(
            "vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", ITL_BUCKETS
        )
        self.tpot = _h(
            "vllm:request_time_per_output_token_seconds",
            "Histogram of time_per_output_token_seconds per request.",
            ITL_BUCKETS,
        )
        self.e2e = _h(
            "vllm:e2e_request_latency_seconds",
            "Histogram of e2e request latency in seconds.",
            LATENCY_BUCKETS,
        )
        self.queue = _h(
            "vllm:request_queue_time_seconds",
            "Histogram of time spent in WAITING phase for request.",
            LATENCY_BUCKETS,
        )
        self.inference = _h(
            "vllm:request_inference_time_seconds",
            "Histogram of time spent in RUNNING phase for request.",
            LATENCY_BUCKETS,
        )
        self.prefill = _h(
            "vllm:request_prefill_time_seconds",
            "Histogram of time spent in PREFILL phase for request.",
            LATENCY_BUCKETS,
        )
        self.decode = _h(
            "vllm:request_decode_time_seconds",
            "Histogram of time spent in DECODE phase for request.",
            LATENCY_BUCKETS,
        )
        self.kv_computed = _h(
            "vllm:request_prefill_kv_computed_tokens",
            "Histogram of new KV tokens computed during prefill (excluding cached tokens).",
            tok,
        )
        self.cache_config = _g("vllm:cache_config_info", "Information of the LLMEngine CacheConfig")
        self._init_series(cache_info)

    def _init_series(self, cache_info: dict[str, str]) -> None:
        lab = self.labels
        for fam in (self.running, self.waiting, self.kv_usage):
            fam.set(lab, 0.0)
        for reason in ("capacity", "deferred"):
            self.waiting_by_reason.set((*lab, ("reason", reason)), 0.0)
        for fam in (
            self.prefix_queries,
            self.prefix_hits,
            self.preemptions,
            self.prompt_tokens,
            self.prompt_cached,
            self.generation_tokens,
            *self.zero_counters,
        ):
            fam.inc(lab, 0.0)
        for state, value in (("awake", 1.0), ("weights_offloaded", 0.0), ("discard_all", 0.0)):
            self.sleep_state.set((*lab, ("sleep_state", state)), value)
        for source in ("local_compute", "local_cache_hit", "external_kv_transfer"):
            self.prompt_by_source.inc((*lab, ("source", source)), 0.0)
        for reason in FINISH_REASONS:
            self.success.inc((*lab, ("finished_reason", reason)), 0.0)
        for hist in self.histograms:
            hist.ensure(lab)
        self.cache_config.set(tuple((k, v) for k, v in cache_info.items()) + (("engine", "0"),), 1.0)

    @property
    def zero_counters(self) -> tuple[Family, ...]:
        """Counters of features the simulator does not have, or filled in at render time."""
        return (
            self.est_flops,
            self.est_read,
            self.est_write,
            self.ext_queries,
            self.ext_hits,
            self.mm_queries,
            self.mm_hits,
        )

    @property
    def histograms(self) -> tuple[Histogram, ...]:
        return (
            self.req_prompt,
            self.req_gen,
            self.iteration,
            self.max_gen,
            self.params_n,
            self.params_max_tokens,
            self.ttft,
            self.itl,
            self.tpot,
            self.e2e,
            self.queue,
            self.inference,
            self.prefill,
            self.decode,
            self.kv_computed,
        )

    def on_step(self, step_tokens: int) -> None:
        self.iteration.observe(self.labels, step_tokens)

    def on_first_token(self, seq: Sequence) -> None:
        self.ttft.observe(self.labels, (seq.first_token_ns - seq.arrival_ns) / 1e9)

    def on_gaps(self, gaps: dict[int, int]) -> None:
        for gap_ns, n in gaps.items():
            self.itl.observe(self.labels, gap_ns / 1e9, n)

    def on_finished(self, group: RequestGroup) -> None:
        lab = self.labels
        self.params_n.observe(lab, 1)
        self.params_max_tokens.observe(lab, group.max_tokens_param)
        for seq in group.seqs:
            self._on_seq_finished(seq)

    def _on_seq_finished(self, seq: Sequence) -> None:
        lab = self.labels
        self.success.inc((*lab, ("finished_reason", seq.finish_reason or "abort")))
        if not seq.first_token_ns:
            return
        self.e2e.observe(lab, (seq.last_token_ns - seq.arrival_ns) / 1e9)
        self.queue.observe(lab, (seq.scheduled_ns - seq.arrival_ns) / 1e9)
        self.prefill.observe(lab, (seq.first_token_ns - seq.scheduled_ns) / 1e9)
        self.decode.observe(lab, (seq.last_token_ns - seq.first_token_ns) / 1e9)
        self.inference.observe(lab, (seq.last_token_ns - seq.scheduled_ns) / 1e9)
        if seq.generated > 1:
            self.tpot.observe(lab, (seq.last_token_ns - seq.first_token_ns) / 1e9 / (seq.generated - 1))
        self.req_prompt.observe(lab, seq.prompt_len)
        self.req_gen.observe(lab, seq.generated)
        self.max_gen.observe(lab, seq.max_tokens)
        self.kv_computed.observe(lab, seq.prompt_len - seq.cached_tokens)

    def render(self, sched: Scheduler) -> bytes:
        lab = self.labels
        c = sched.counters
        self.running.set(lab, float(len(sched.running)))
        self.waiting.set(lab, float(len(sched.waiting)))
        self.waiting_by_reason.set((*lab, ("reason", "capacity")), float(len(sched.waiting)))
        self.kv_usage.set(lab, sched.kv.usage())
        self.prefix_queries.values[lab] = float(c.prefix_queries)
        self.prefix_hits.values[lab] = float(c.cached_prompt_tokens)
        self.preemptions.values[lab] = float(c.preemptions)
        self.prompt_tokens.values[lab] = float(c.prompt_tokens)
        self.prompt_cached.values[lab] = float(c.cached_prompt_tokens)
        self.prompt_by_source.values[(*lab, ("source", "local_compute"))] = float(
            c.prompt_tokens - c.cached_prompt_tokens
        )
        self.prompt_by_source.values[(*lab, ("source", "local_cache_hit"))] = float(c.cached_prompt_tokens)
        self.generation_tokens.values[lab] = float(c.generation_tokens)
        self.est_flops.values[lab] = c.flops_per_gpu
        self.est_read.values[lab] = c.read_bytes_per_gpu
        self.est_write.values[lab] = c.write_bytes_per_gpu
        return render(
            (
                self.est_flops,
                self.est_read,
                self.est_write,
                *self.worker,
                self.running,
                self.waiting,
                self.waiting_by_reason,
                self.sleep_state,
                self.kv_usage,
                self.prefix_queries,
                self.prefix_hits,
                self.ext_queries,
                self.ext_hits,
                self.mm_queries,
                self.mm_hits,
                self.preemptions,
                self.prompt_tokens,
                self.prompt_by_source,
                self.prompt_cached,
                self.generation_tokens,
                self.success,
                *self.histograms,
                self.cache_config,
            )
        )
