"""Benchmark run (live): one run's load, latency, client health, engine and GPUs while it goes."""

from __future__ import annotations

from .board import dashboard, multi_var, query_var, run_boundary_annotations, slo_vars
from .common import quantile_pairs, series
from .panels import Json, heatmap, row, stat, target, targets, timeseries

RUN = 'run_id="$run_id"'
ENGINE = 'instance=~"$engine_instance"'
GPU = 'Hostname=~"$Hostname"'
GPU_LEGEND = "GPU {{gpu}} {{Hostname}}"
LATENCIES = (
    (
        "TTFT",
        "time_to_first_token",
        "ttft_slo",
        "Time to first token: first SSE chunk with a non-empty choice minus send.",
    ),
    (
        "TPOT",
        "time_per_output_token",
        "tpot_slo",
        "Time per output token: (E2E - TTFT) / (output_tokens - 1).",
    ),
    ("ITL", "inter_token_latency", "", "Inter-token latency: gap between consecutive token-bearing chunks."),
    ("E2E latency", "request_duration", "e2e_slo", "End to end: last token-bearing chunk minus send."),
)

RATE_DESC = (
    "Per second over the last minute; while the run is younger than a minute (or lasted less), "
    "its count so far over its elapsed time (recording rules run_id:*:rate1m)."
)


def _quantiles(metric: str, slo_var: str) -> list[Json]:
    pairs = quantile_pairs(f"loadgen_{metric}_seconds_bucket{{{RUN}}}")
    if slo_var:
        pairs.append((f"vector(${slo_var})", "SLO"))
    return targets(*pairs)


def _latency_panels() -> list[Json]:
    panels: list[Json] = [row("Latency (client-side, exact definitions in the README)")]
    for title, metric, slo_var, desc in LATENCIES:
        panels.append(
            timeseries(
                f"{title} quantiles", _quantiles(metric, slo_var), "s", desc=desc, slo_series=bool(slo_var)
            )
        )
        panels.append(
            heatmap(
                f"{title} distribution",
                f"sum by (le) (increase(loadgen_{metric}_seconds_bucket{{{RUN}}}[$__rate_interval]))",
                "s",
                desc=f"{desc} Requests per bucket per interval.",
            )
        )
    return panels


def _summary_panels() -> list[Json]:
    return [
        stat(
            "Asked rate",
            [target(f"max(loadgen_target_request_rate{{{RUN}}})", "asked")],
            "reqps",
            desc="Request rate the schedule asks for (+Inf = all at once).",
        ),
        stat(
            "Achieved (ok, 1m)",
            [target(f"sum(run_id:loadgen_requests_ok:rate1m{{{RUN}}})", "ok req/s")],
            "reqps",
            desc=RATE_DESC,
        ),
        stat("In flight", [target(f"sum(loadgen_in_flight_requests{{{RUN}}})", "in flight")], "short"),
        stat(
            "Error ratio (1m)",
            [target(f"max(run_id:loadgen_requests_failed:ratio_rate1m{{{RUN}}})", "errors")],
            "percentunit",
            thresholds=[(None, "green"), (0.01, "orange"), (0.05, "red")],
        ),
        stat(
            "p99 TTFT (run so far)",
            [target(f"max(run_id:loadgen_time_to_first_token_seconds:p99{{{RUN}}})", "p99")],
            "s",
        ),
        stat(
            "Goodput (run so far)",
            [target(f"max(run_id:loadgen_goodput:run_rate{{{RUN}}})", "goodput")],
            "reqps",
            desc="Requests per second meeting every SLO given to the run.",
        ),
    ]


def _load_panels() -> list[Json]:
    return [
        row("Load"),
        timeseries(
            "Asked vs achieved request rate",
            targets(
                (f"max(loadgen_target_request_rate{{{RUN}}})", "asked"),
                (f"sum(run_id:loadgen_requests:rate1m{{{RUN}}})", "finished (any outcome)"),
                (f"sum(run_id:loadgen_requests_ok:rate1m{{{RUN}}})", "achieved (ok)"),
                (f"sum(run_id:loadgen_goodput:rate1m{{{RUN}}})", "goodput (met SLOs)"),
            ),
            "reqps",
            desc=RATE_DESC,
        ),
        timeseries(
            "In-flight requests",
            targets(
                (f"sum(loadgen_in_flight_requests{{{RUN}}})", "in flight"),
                (f"max(loadgen_max_concurrency{{{RUN}}} > 0)", "max concurrency"),
            ),
            "short",
        ),
        series(
            "Outcomes",
            f"sum by (outcome) (run_id:loadgen_requests_by_outcome:rate1m{{{RUN}}})",
            "{{outcome}}",
            "reqps",
            desc=RATE_DESC,
            stack=True,
        ),
        timeseries(
            "Prefix-cache hit ratio (engine-reported, run so far)",
            targets(
                (
                    f"sum(loadgen_cached_prompt_tokens_total{{{RUN}}})"
                    f" / sum(loadgen_prompt_tokens_total{{{RUN}}})",
                    "cached share of prompt tokens",
                ),
            ),
            "percentunit",
            desc="Prompt tokens the engine reported served from its prefix cache "
            "(usage.prompt_tokens_details.cached_tokens) over all prompt tokens of the run's ok requests. "
            "No data: the engine sends no details (the launch flag that turns them on, per engine: "
            "docs/prefix-cache.md).",
        ),
        timeseries(
            "Tokens per second",
            targets(
                (f"sum(run_id:loadgen_prompt_tokens:rate1m{{{RUN}}})", "prompt tok/s"),
                (f"sum(run_id:loadgen_output_tokens:rate1m{{{RUN}}})", "output tok/s"),
            ),
            "suffix: tok/s",
            desc=RATE_DESC,
        ),
    ]


def _client_panels() -> list[Json]:
    return [
        row("Client health (is the load generator the bottleneck?)"),
        timeseries(
            "Schedule lag (actual send - scheduled send)",
            targets(*quantile_pairs(f"loadgen_schedule_lag_seconds_bucket{{{RUN}}}", ("0.5", "0.99"))),
            "s",
            desc="Coordinated-omission guard: growing lag means the client cannot keep the asked rate.",
        ),
        series(
            "Event-loop lag",
            f"max by (instance) (loadgen_event_loop_lag_seconds{{{RUN}}})",
            "{{instance}}",
            "s",
            desc="Late timestamps inflate TTFT and ITL: keep this far below the latencies measured.",
        ),
    ]


def _engine_panels() -> list[Json]:
    """The engine-neutral recording rules (prometheus/rules/engines.yml, written from the engine
    files): the same panels for every registered engine, labelled by the engine each series is."""
    legend = "{{engine}} {{instance}}"
    return [
        row("Engine (its own /metrics, through the engine-neutral rules engine:*)"),
        timeseries(
            "Running and waiting requests",
            targets(
                (f"sum by (engine, instance) (engine:running_requests{{{ENGINE}}})", f"running {legend}"),
                (f"sum by (engine, instance) (engine:waiting_requests{{{ENGINE}}})", f"waiting {legend}"),
            ),
            "short",
        ),
        series(
            "KV-cache usage",
            f"max by (engine, instance) (engine:kv_cache_usage:ratio{{{ENGINE}}})",
            legend,
            "percentunit",
            desc="Near 100% the engine queues or preempts: the concurrency ceiling.",
        ),
        timeseries(
            "Preemptions / retractions",
            targets(
                (
                    f"sum by (engine, instance) (engine:preemptions:rate1m{{{ENGINE}}})",
                    f"preemptions/s {legend}",
                ),
                (f"sum by (engine, instance) (engine:preemptions{{{ENGINE}}})", f"retracted now {legend}"),
            ),
            "short",
            desc="A counter's rate or a gauge of requests retracted now, as the engine file says.",
        ),
    ]


def _gpu_panels() -> list[Json]:
    return [
        row("GPUs (dcgm-exporter names: infergauge exporter or NVIDIA dcgm-exporter)"),
        series("GPU utilization", f"DCGM_FI_DEV_GPU_UTIL{{{GPU}}}", GPU_LEGEND, "percent", w=8),
        series("GPU memory used", f"DCGM_FI_DEV_FB_USED{{{GPU}}}", GPU_LEGEND, "mbytes", w=8),
        series("Power", f"DCGM_FI_DEV_POWER_USAGE{{{GPU}}}", GPU_LEGEND, "watt", w=8),
        timeseries(
            "Temperature",
            targets(
                (f"DCGM_FI_DEV_GPU_TEMP{{{GPU}}}", "GPU {{gpu}} core"),
                (f"DCGM_FI_DEV_MEMORY_TEMP{{{GPU}}}", "GPU {{gpu}} memory"),
            ),
            "celsius",
            w=8,
        ),
        series(
            "SM clock",
            f"DCGM_FI_DEV_SM_CLOCK{{{GPU}}} * 1e6",
            GPU_LEGEND,
            "hertz",
            w=8,
            desc="A drop under load with an active throttle reason explains slower runs.",
        ),
        series(
            "Clock event (throttle) reasons",
            f"max by (Hostname, gpu, reason) (infergauge_gpu_clock_event_active{{{GPU}}})",
            "GPU {{gpu}} {{reason}}",
            "bool_on_off",
            w=8,
        ),
    ]


def build() -> Json:
    """The live run dashboard."""
    panels = [
        *_summary_panels(),
        *_load_panels(),
        *_latency_panels(),
        *_client_panels(),
        *_engine_panels(),
        *_gpu_panels(),
    ]
    variables = [
        query_var("run_id", "Run", "label_values(loadgen_run_info, run_id)", sort=2),
        multi_var(
            "engine_instance",
            "Engine",
            "label_values(engine:running_requests, instance)",
        ),
        multi_var(
            "Hostname",
            "GPU host",
            "label_values(DCGM_FI_DEV_GPU_UTIL, Hostname)",
        ),
        *slo_vars(),
    ]
    return dashboard(
        "infergauge-run-live",
        "Benchmark run (live)",
        panels,
        desc="One loadgen run while it goes: asked vs achieved load, latency quantiles and distributions, "
        "client health, the engine's queue and KV cache, and the GPUs.",
        variables=variables,
        annotations=run_boundary_annotations(RUN),
        time_from="now-15m",
        refresh="5s",
        tags=("run",),
    )
