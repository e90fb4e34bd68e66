"""Engine dashboards on vLLM's and SGLang's own /metrics names (checked against real captures)."""

from __future__ import annotations

from infergauge.engines import get

from .board import dashboard, multi_var
from .common import info_table, organize, quantile_pairs, series
from .panels import Json, row, targets, timeseries

VLLM, SGLANG = get("vllm"), get("sglang")  # metric names by role, from the engine files
V = 'instance=~"$instance", model_name=~"$model_name"'


def _sum(metric: str) -> str:
    return f"sum by (instance) ({metric}{{{V}}})"


def _max(metric: str) -> str:
    return f"max by (instance) ({metric}{{{V}}})"


def _rate(metric: str, by: str = "instance") -> str:
    return f"sum by ({by}) (rate({metric}{{{V}}}[$__rate_interval]))"


def _quantiles(histogram: str, title: str, desc: str = "") -> Json:
    pairs = quantile_pairs(f"{histogram}_bucket{{{V}}}")
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
                (_sum(VLLM.metrics["running"]), "running {{instance}}"),
                (_sum(VLLM.metrics["waiting"]), "waiting {{instance}}"),
            ),
            "short",
            w=8,
        ),
        series("KV-cache usage", _max(VLLM.metrics["kv_usage"]), "{{instance}}", "percentunit", w=8),
        series(
            "Preemptions",
            _rate(VLLM.metrics["preemptions"]),
            "{{instance}}",
            "short",
            w=8,
            desc="Requests evicted for lack of KV blocks (recomputed later).",
        ),
        series(
            "Prefix-cache hit ratio",
            f"{_rate(VLLM.metrics['prefix_cache_hits'])} / {_rate(VLLM.metrics['prefix_cache_queries'])}",
            "{{instance}}",
            "percentunit",
            w=8,
            desc="Tokens served from the prefix cache / tokens looked up.",
        ),
        timeseries(
            "Token throughput",
            targets(
                (_rate(VLLM.metrics["prompt_tokens"]), "prompt {{instance}}"),
                (_rate(VLLM.metrics["generation_tokens"]), "generation {{instance}}"),
            ),
            "suffix: tok/s",
            w=8,
        ),
        series(
            "Finished requests by reason",
            _rate(VLLM.metrics["finished"], by="finished_reason"),
            "{{finished_reason}}",
            "reqps",
            w=8,
            stack=True,
        ),
        row("Latency (server-side)"),
        _quantiles(VLLM.metrics["ttft"], "TTFT"),
        _quantiles(VLLM.metrics["itl"], "Inter-token latency"),
        _quantiles(VLLM.metrics["tpot"], "TPOT"),
        _quantiles(VLLM.metrics["e2e"], "E2E latency"),
        _quantiles(VLLM.metrics["queue_time"], "Queue time", "Waiting before the first schedule."),
        _quantiles(VLLM.metrics["prefill_time"], "Prefill time"),
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
                (_sum(SGLANG.metrics["running"]), "running {{instance}}"),
                (_sum(SGLANG.metrics["waiting"]), "queued {{instance}}"),
            ),
            "short",
            w=8,
        ),
        series(
            "KV-cache (token pool) usage",
            _max(SGLANG.metrics["kv_usage"]),
            "{{instance}}",
            "percentunit",
            w=8,
        ),
        timeseries(
            "KV tokens used",
            targets(
                (_sum(SGLANG.metrics["kv_used_tokens"]), "used {{instance}}"),
                (_sum(SGLANG.metrics["kv_capacity_tokens"]), "capacity {{instance}}"),
            ),
            "short",
            w=8,
        ),
        series(
            "Retracted requests",
            _sum(SGLANG.metrics["preemptions"]),
            "{{instance}}",
            "short",
            w=8,
            desc="Requests retracted for lack of KV space (SGLang's preemption).",
        ),
        series(
            "Prefix (radix) cache hit rate",
            _max(SGLANG.metrics["cache_hit_rate"]),
            "{{instance}}",
            "percentunit",
            w=8,
        ),
        timeseries(
            "Token throughput",
            targets(
                (_rate(SGLANG.metrics["prompt_tokens"]), "prompt {{instance}}"),
                (_rate(SGLANG.metrics["generation_tokens"]), "generation {{instance}}"),
                (_sum(SGLANG.metrics["gen_throughput"]), "generation (engine's own gauge) {{instance}}"),
            ),
            "suffix: tok/s",
            w=8,
        ),
        row("Latency (server-side)"),
        _quantiles(SGLANG.metrics["ttft"], "TTFT"),
        _quantiles(SGLANG.metrics["itl"], "Inter-token latency"),
        _quantiles(SGLANG.metrics["e2e"], "E2E latency"),
        timeseries(
            "Requests",
            targets(
                (_rate(SGLANG.metrics["requests"]), "requests {{instance}}"),
                (_rate(SGLANG.metrics["aborted"]), "aborted {{instance}}"),
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
        variables=_variables(VLLM.metrics["running"]),
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
        variables=_variables(SGLANG.metrics["running"]),
        time_from="now-1h",
        tags=("engine", "sglang"),
    )
