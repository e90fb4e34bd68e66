"""Engine dashboards on vLLM's and SGLang's own /metrics names (checked against real captures)."""

from __future__ import annotations

from .board import dashboard, multi_var
from .common import info_table, organize, quantile_pairs, series
from .panels import Json, row, targets, timeseries

V = 'instance=~"$instance", model_name=~"$model_name"'


def _sum(metric: str) -> str:
    return f"sum by (instance) ({metric}{{{V}}})"


def _max(metric: str) -> str:
    return f"max by (instance) ({metric}{{{V}}})"


def _rate(metric: str, by: str = "instance") -> str:
    return f"sum by ({by}) (rate({metric}{{{V}}}[$__rate_interval]))"


def _quantiles(prefix: str, metric: str, title: str, desc: str = "") -> Json:
    pairs = quantile_pairs(f"{prefix}:{metric}_bucket{{{V}}}")
    return timeseries(title, targets(*pairs), "s", desc=desc, w=8)


def _variables(probe: str) -> list[Json]:
    return [
        multi_var("instance", "Instance", f"label_values({probe}, instance)"),
        multi_var(
            "model_name",
            "Model",
            f'label_values({probe}{{instance=~"$instance"}}, model_name)',
        ),
    ]


def _vllm_panels() -> list[Json]:
    return [
        row("Scheduler"),
        timeseries(
            "Running and waiting requests",
            targets(
                (_sum("vllm:num_requests_running"), "running {{instance}}"),
                (_sum("vllm:num_requests_waiting"), "waiting {{instance}}"),
            ),
            "short",
            w=8,
        ),
        series("KV-cache usage", _max("vllm:kv_cache_usage_perc"), "{{instance}}", "percentunit", w=8),
        series(
            "Preemptions",
            _rate("vllm:num_preemptions_total"),
            "{{instance}}",
            "short",
            w=8,
            desc="Requests evicted for lack of KV blocks (recomputed later).",
        ),
        series(
            "Prefix-cache hit ratio",
            f"{_rate('vllm:prefix_cache_hits_total')} / {_rate('vllm:prefix_cache_queries_total')}",
            "{{instance}}",
            "percentunit",
            w=8,
            desc="Tokens served from the prefix cache / tokens looked up.",
        ),
        timeseries(
            "Token throughput",
            targets(
                (_rate("vllm:prompt_tokens_total"), "prompt {{instance}}"),
                (_rate("vllm:generation_tokens_total"), "generation {{instance}}"),
            ),
            "suffix: tok/s",
            w=8,
        ),
        series(
            "Finished requests by reason",
            _rate("vllm:request_success_total", by="finished_reason"),
            "{{finished_reason}}",
            "reqps",
            w=8,
            stack=True,
        ),
        row("Latency (server-side)"),
        _quantiles("vllm", "time_to_first_token_seconds", "TTFT"),
        _quantiles("vllm", "inter_token_latency_seconds", "Inter-token latency"),
        _quantiles("vllm", "request_time_per_output_token_seconds", "TPOT"),
        _quantiles("vllm", "e2e_request_latency_seconds", "E2E latency"),
        _quantiles("vllm", "request_queue_time_seconds", "Queue time", "Waiting before the first schedule."),
        _quantiles("vllm", "request_prefill_time_seconds", "Prefill time"),
        row("Configuration"),
        info_table(
            "Cache config (vllm:cache_config_info)",
            'max without (job, __name__) (vllm:cache_config_info{instance=~"$instance"})',
            transformations=organize({"Time": True, "Value": True}),
            h=6,
        ),
    ]


def _sglang_panels() -> list[Json]:
    return [
        row("Scheduler"),
        timeseries(
            "Running and queued requests",
            targets(
                (_sum("sglang:num_running_reqs"), "running {{instance}}"),
                (_sum("sglang:num_queue_reqs"), "queued {{instance}}"),
            ),
            "short",
            w=8,
        ),
        series("KV-cache (token pool) usage", _max("sglang:token_usage"), "{{instance}}", "percentunit", w=8),
        timeseries(
            "KV tokens used",
            targets(
                (_sum("sglang:kv_used_tokens"), "used {{instance}}"),
                (_sum("sglang:max_total_num_tokens"), "capacity {{instance}}"),
            ),
            "short",
            w=8,
        ),
        series(
            "Retracted requests",
            _sum("sglang:num_retracted_reqs"),
            "{{instance}}",
            "short",
            w=8,
            desc="Requests retracted for lack of KV space (SGLang's preemption).",
        ),
        series(
            "Prefix (radix) cache hit rate", _max("sglang:cache_hit_rate"), "{{instance}}", "percentunit", w=8
        ),
        timeseries(
            "Token throughput",
            targets(
                (_rate("sglang:prompt_tokens_total"), "prompt {{instance}}"),
                (_rate("sglang:generation_tokens_total"), "generation {{instance}}"),
                (_sum("sglang:gen_throughput"), "generation (engine's own gauge) {{instance}}"),
            ),
            "suffix: tok/s",
            w=8,
        ),
        row("Latency (server-side)"),
        _quantiles("sglang", "time_to_first_token_seconds", "TTFT"),
        _quantiles("sglang", "inter_token_latency_seconds", "Inter-token latency"),
        _quantiles("sglang", "e2e_request_latency_seconds", "E2E latency"),
        timeseries(
            "Requests",
            targets(
                (_rate("sglang:num_requests_total"), "requests {{instance}}"),
                (_rate("sglang:num_aborted_requests_total"), "aborted {{instance}}"),
            ),
            "reqps",
            w=8,
        ),
    ]


def build_vllm() -> Json:
    """vLLM's native metrics."""
    return dashboard(
        "infergauge-engine-vllm",
        "Engine: vLLM",
        _vllm_panels(),
        desc="vLLM's own /metrics (names as in vLLM 0.26.0): scheduler, KV cache, server-side latency.",
        variables=_variables("vllm:num_requests_running"),
        time_from="now-1h",
        tags=("engine", "vllm"),
    )


def build_sglang() -> Json:
    """SGLang's native metrics."""
    return dashboard(
        "infergauge-engine-sglang",
        "Engine: SGLang",
        _sglang_panels(),
        desc="SGLang's own /metrics (names as in SGLang 0.5.14, --enable-metrics): scheduler, KV "
        "cache, server-side latency.",
        variables=_variables("sglang:num_running_reqs"),
        time_from="now-1h",
        tags=("engine", "sglang"),
    )
