"""Engine dashboards on vLLM's and SGLang's own /metrics names (checked against real captures)."""

from __future__ import annotations

from .board import dashboard, query_var
from .panels import Json, row, table, target, targets, timeseries

V = 'instance=~"$instance", model_name=~"$model_name"'


def _quantiles(prefix: str, metric: str, title: str, desc: str = "") -> Json:
    pairs = [
        (
            f"histogram_quantile({q}, sum by (le) (rate({prefix}:{metric}_bucket{{{V}}}[$__rate_interval])))",
            f"p{int(float(q) * 100)}",
        )
        for q in ("0.5", "0.9", "0.99")
    ]
    return timeseries(title, targets(*pairs), "s", desc=desc, w=8)


def _variables(probe: str) -> list[Json]:
    return [
        query_var("instance", "Instance", f"label_values({probe}, instance)", multi=True, include_all=True),
        query_var(
            "model_name",
            "Model",
            f'label_values({probe}{{instance=~"$instance"}}, model_name)',
            multi=True,
            include_all=True,
        ),
    ]


def _vllm_panels() -> list[Json]:
    rate = "[$__rate_interval]"
    return [
        row("Scheduler"),
        timeseries(
            "Running and waiting requests",
            targets(
                (f"sum by (instance) (vllm:num_requests_running{{{V}}})", "running {{instance}}"),
                (f"sum by (instance) (vllm:num_requests_waiting{{{V}}})", "waiting {{instance}}"),
            ),
            "short",
            w=8,
        ),
        timeseries(
            "KV-cache usage",
            [target(f"max by (instance) (vllm:kv_cache_usage_perc{{{V}}})", "{{instance}}")],
            "percentunit",
            w=8,
        ),
        timeseries(
            "Preemptions",
            [target(f"sum by (instance) (rate(vllm:num_preemptions_total{{{V}}}{rate}))", "{{instance}}")],
            "short",
            w=8,
            desc="Requests evicted for lack of KV blocks (recomputed later).",
        ),
        timeseries(
            "Prefix-cache hit ratio",
            [
                target(
                    f"sum by (instance) (rate(vllm:prefix_cache_hits_total{{{V}}}{rate})) / "
                    f"sum by (instance) (rate(vllm:prefix_cache_queries_total{{{V}}}{rate}))",
                    "{{instance}}",
                )
            ],
            "percentunit",
            w=8,
            desc="Tokens served from the prefix cache / tokens looked up.",
        ),
        timeseries(
            "Token throughput",
            targets(
                (f"sum by (instance) (rate(vllm:prompt_tokens_total{{{V}}}{rate}))", "prompt {{instance}}"),
                (
                    f"sum by (instance) (rate(vllm:generation_tokens_total{{{V}}}{rate}))",
                    "generation {{instance}}",
                ),
            ),
            "suffix: tok/s",
            w=8,
        ),
        timeseries(
            "Finished requests by reason",
            [
                target(
                    f"sum by (finished_reason) (rate(vllm:request_success_total{{{V}}}{rate}))",
                    "{{finished_reason}}",
                )
            ],
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
        table(
            "Cache config (vllm:cache_config_info)",
            [
                target(
                    'max without (job, __name__) (vllm:cache_config_info{instance=~"$instance"})',
                    instant=True,
                    fmt="table",
                )
            ],
            transformations=[
                {
                    "id": "organize",
                    "options": {
                        "excludeByName": {"Time": True, "Value": True},
                        "renameByName": {},
                        "indexByName": {},
                    },
                }
            ],
            h=6,
        ),
    ]


def _sglang_panels() -> list[Json]:
    rate = "[$__rate_interval]"
    return [
        row("Scheduler"),
        timeseries(
            "Running and queued requests",
            targets(
                (f"sum by (instance) (sglang:num_running_reqs{{{V}}})", "running {{instance}}"),
                (f"sum by (instance) (sglang:num_queue_reqs{{{V}}})", "queued {{instance}}"),
            ),
            "short",
            w=8,
        ),
        timeseries(
            "KV-cache (token pool) usage",
            [target(f"max by (instance) (sglang:token_usage{{{V}}})", "{{instance}}")],
            "percentunit",
            w=8,
        ),
        timeseries(
            "KV tokens used",
            targets(
                (f"sum by (instance) (sglang:kv_used_tokens{{{V}}})", "used {{instance}}"),
                (f"sum by (instance) (sglang:max_total_num_tokens{{{V}}})", "capacity {{instance}}"),
            ),
            "short",
            w=8,
        ),
        timeseries(
            "Retracted requests",
            [target(f"sum by (instance) (sglang:num_retracted_reqs{{{V}}})", "{{instance}}")],
            "short",
            w=8,
            desc="Requests retracted for lack of KV space (SGLang's preemption).",
        ),
        timeseries(
            "Prefix (radix) cache hit rate",
            [target(f"max by (instance) (sglang:cache_hit_rate{{{V}}})", "{{instance}}")],
            "percentunit",
            w=8,
        ),
        timeseries(
            "Token throughput",
            targets(
                (f"sum by (instance) (rate(sglang:prompt_tokens_total{{{V}}}{rate}))", "prompt {{instance}}"),
                (
                    f"sum by (instance) (rate(sglang:generation_tokens_total{{{V}}}{rate}))",
                    "generation {{instance}}",
                ),
                (
                    f"sum by (instance) (sglang:gen_throughput{{{V}}})",
                    "generation (engine's own gauge) {{instance}}",
                ),
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
                (
                    f"sum by (instance) (rate(sglang:num_requests_total{{{V}}}{rate}))",
                    "requests {{instance}}",
                ),
                (
                    f"sum by (instance) (rate(sglang:num_aborted_requests_total{{{V}}}{rate}))",
                    "aborted {{instance}}",
                ),
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
