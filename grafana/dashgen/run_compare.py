"""Run comparison: one row per run in the time range, bars across runs, throughput vs p99 latency."""

from __future__ import annotations

from .board import dashboard, multi_var, run_boundary_annotations, slo_vars
from .common import series as one_query_series
from .panels import Json, barchart, table, target, text, xychart

SEL = 'target=~"$target", scenario=~"$scenario", model=~"$model"'

# (column title, recorded series, unit): whole-run figures recorded by prometheus/rules/recording.yml;
# last_over_time over the dashboard range picks each run's final value after its loadgen stopped.
COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("p50 TTFT", "run_id:loadgen_time_to_first_token_seconds:p50", "s"),
    ("p99 TTFT", "run_id:loadgen_time_to_first_token_seconds:p99", "s"),
    ("p50 TPOT", "run_id:loadgen_time_per_output_token_seconds:p50", "s"),
    ("p99 TPOT", "run_id:loadgen_time_per_output_token_seconds:p99", "s"),
    ("p50 E2E", "run_id:loadgen_request_duration_seconds:p50", "s"),
    ("p99 E2E", "run_id:loadgen_request_duration_seconds:p99", "s"),
    ("req/s (ok)", "run_id:loadgen_requests_ok:run_rate", "reqps"),
    ("output tok/s", "run_id:loadgen_output_tokens:run_rate", "suffix: tok/s"),
    ("goodput req/s", "run_id:loadgen_goodput:run_rate", "reqps"),
    ("failed requests", "run_id:loadgen_requests_failed:total", "short"),
)
# Each run's p99 against the dashboard's SLO variables (boxes at the top, defaults in board.py).
SLO_P99 = (
    ("run_id:loadgen_time_to_first_token_seconds:p99", "ttft_slo"),
    ("run_id:loadgen_time_per_output_token_seconds:p99", "tpot_slo"),
    ("run_id:loadgen_request_duration_seconds:p99", "e2e_slo"),
)
SLO_COLUMN = "p99 within SLOs"
RUN_INFO_LABELS = "run_id, target, model, scenario, engine, engine_version"
FLAG_LABELS = (
    "tensor_parallel_size, max_num_seqs, gpu_memory_utilization, max_model_len, block_size, chunked_prefill, "
    "prefix_caching, kv_cache_dtype, quantization"
)


def per_run(series: str) -> str:
    """The final value of a recorded per-run series, one sample per run_id."""
    return f"max by (run_id) (last_over_time({series}{{{SEL}}}[$__range]))"


def cache_hit_ratio() -> str:
    """Each run's share of prompt tokens the engine reported as prefix-cache hits (final values)."""
    cached, prompt = (
        f"sum by (run_id) (last_over_time({name}{{{SEL}}}[$__range]))"
        for name in ("loadgen_cached_prompt_tokens_total", "loadgen_prompt_tokens_total")
    )
    return f"{cached} / {prompt}"


def within_slos() -> str:
    """1 for a run whose p99 TTFT, TPOT and E2E are all within the dashboard's SLO boxes, else 0."""
    checks = [f"({per_run(series)} <= bool ${var})" for series, var in SLO_P99]
    return " * ".join(checks)


def _slo_column() -> Json:
    mappings = [
        {
            "type": "value",
            "options": {"0": {"text": "no", "color": "red"}, "1": {"text": "yes", "color": "green"}},
        }
    ]
    return {
        "matcher": {"id": "byName", "options": SLO_COLUMN},
        "properties": [
            {"id": "mappings", "value": mappings},
            {"id": "custom.cellOptions", "value": {"type": "color-text"}},
        ],
    }


def _ref(i: int) -> str:
    return chr(ord("A") + i)


def _table() -> Json:
    tgts = [
        target(
            f"max by ({RUN_INFO_LABELS}) (last_over_time(loadgen_run_info{{{SEL}}}[$__range]))",
            ref="A",
            instant=True,
            fmt="table",
        )
    ]
    tgts.append(
        target(
            f"max by (run_id, {FLAG_LABELS}) (last_over_time(run_id:engine_launch_flags:info{{{SEL}}}"
            "[$__range]))",
            ref="B",
            instant=True,
            fmt="table",
        )
    )
    renames: dict[str, str] = {}
    overrides: list[Json] = []
    for i, (title, series, unit) in enumerate(COLUMNS, start=2):
        tgts.append(target(per_run(series), ref=_ref(i), instant=True, fmt="table"))
        renames[f"Value #{_ref(i)}"] = title
        overrides.append(
            {"matcher": {"id": "byName", "options": title}, "properties": [{"id": "unit", "value": unit}]}
        )
    slo_ref = _ref(len(tgts))
    tgts.append(target(within_slos(), ref=slo_ref, instant=True, fmt="table"))
    renames[f"Value #{slo_ref}"] = SLO_COLUMN
    overrides.append(_slo_column())
    transformations = [
        {"id": "merge", "options": {}},
        {
            "id": "organize",
            "options": {
                "excludeByName": {"Time": True, "Value #A": True, "Value #B": True},
                "renameByName": renames,
                "indexByName": {},
            },
        },
        {"id": "sortBy", "options": {"sort": [{"field": "run_id", "desc": True}]}},
    ]
    return table(
        "Runs in the time range",
        tgts,
        transformations=transformations,
        overrides=overrides,
        h=12,
        desc="One row per run: what ran (target, engine version, model, launch flags) and what it measured. "
        "Latency quantiles are histogram estimates of the whole run; exact ones are in results/<run_id>/. "
        f"'{SLO_COLUMN}': p99 TTFT, TPOT and E2E all at or under the SLO boxes above.",
    )


def _bars() -> list[Json]:
    panels = []
    for title, series, unit in (COLUMNS[1], COLUMNS[5], COLUMNS[6]):
        panels.append(
            barchart(
                f"{title} by run",
                [target(per_run(series), title, instant=True, fmt="table")],
                unit,
                x_field="run_id",
                transformations=[
                    {
                        "id": "organize",
                        "options": {"excludeByName": {"Time": True}, "renameByName": {"Value": title}},
                    }
                ],
            )
        )
    return panels


def _cache_bars() -> Json:
    title = "Prefix-cache hit ratio"
    return barchart(
        f"{title} by run",
        [target(cache_hit_ratio(), title, instant=True, fmt="table")],
        "percentunit",
        x_field="run_id",
        transformations=[
            {"id": "organize", "options": {"excludeByName": {"Time": True}, "renameByName": {"Value": title}}}
        ],
        desc="Cached prompt tokens the engine reported (usage.prompt_tokens_details) over all prompt tokens "
        "of each run: a cold and a warm run of the same prompts differ here first. Runs whose engine sent "
        "no details have no bar.",
    )


def _scatter() -> Json:
    tgts = [
        target(per_run("run_id:loadgen_requests_ok:run_rate"), ref="A", instant=True, fmt="table"),
        target(per_run("run_id:loadgen_request_duration_seconds:p99"), ref="B", instant=True, fmt="table"),
    ]
    transformations = [
        {"id": "merge", "options": {}},
        {
            "id": "organize",
            "options": {
                "excludeByName": {"Time": True},
                "renameByName": {"Value #A": "throughput (req/s)", "Value #B": "p99 E2E (s)"},
                "indexByName": {"run_id": 0, "Value #A": 1, "Value #B": 2},
            },
        },
    ]
    return xychart(
        "Throughput vs p99 E2E latency (up-left is better)",
        tgts,
        x_unit="reqps",
        y_unit="s",
        transformations=transformations,
        desc="Each point is a run. Decide on throughput at the latency SLA, not peak throughput.",
    )


def build() -> Json:
    """The run comparison dashboard."""
    panels: list[Json] = [
        text(
            "How to read this",
            "Each row is one loadgen run (`run_id`). When two numbers disagree, compare the "
            "columns left of the latencies first: engine version, model and launch flags explain most gaps. "
            "Use `loadgen diff RUN_A RUN_B` for the full manifest diff.",
            h=3,
        ),
        _table(),
        *_bars(),
        _cache_bars(),
        _scatter(),
        one_query_series(
            "p99 TTFT over time, per run (last minute)",
            f"max by (run_id) (run_id:loadgen_time_to_first_token_seconds:p99_rate1m{{{SEL}}})",
            "{{run_id}}",
            "s",
            w=12,
            h=10,
        ),
    ]
    variables = [
        multi_var("target", "Target", "label_values(loadgen_run_info, target)"),
        multi_var("scenario", "Scenario", "label_values(loadgen_run_info, scenario)"),
        multi_var("model", "Model", "label_values(loadgen_run_info, model)"),
        *slo_vars(),
    ]
    return dashboard(
        "infergauge-run-comparison",
        "Run comparison",
        panels,
        desc="Every run in the time range side by side: environment, launch flags, latency quantiles, "
        "throughput, goodput and errors.",
        variables=variables,
        annotations=run_boundary_annotations(SEL),
        time_from="now-7d",
        refresh="1m",
        tags=("comparison",),
    )
