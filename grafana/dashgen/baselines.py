"""Baselines: each series' history per watched metric and its change points, from the results store
(PostgreSQL, table `runs` and `changes`), and the scheduler's health from its Prometheus metrics."""

from __future__ import annotations

from loadgen.baseline.metrics import WATCHED, Watched
from loadgen.store.schema import WHOLE_RUNS

from .board import dashboard
from .panels import Json, row, stat, table, target, timeseries
from .sql import on_store, sql_annotation, sql_target, sql_var, store_var

UID = "infergauge-baselines"
SUITE_FILTER = "suite IN ($suite) AND series_key IN ($series)"
RUNS_FILTER = f"{SUITE_FILTER} AND {WHOLE_RUNS}"  # a shard's row is a slice, never a run of the series
PROM_SUITE = 'suite=~"$suite"'
# the watched figures' units -> Grafana's unit ids
UNITS = {"s": "s", "req/s": "reqps", "tok/s": "suffix: tok/s", "": "percentunit"}


def history_sql(watched: Watched) -> str:
    """One watched figure of every selected series over time (ok runs only: the check's input)."""
    return (
        f'SELECT $__time(started_at), series_key AS metric, {watched.column} AS "{watched.label}"\n'
        f"FROM runs\nWHERE $__timeFilter(started_at) AND {RUNS_FILTER}\n"
        f"  AND status = 'ok' AND {watched.column} IS NOT NULL\nORDER BY started_at"
    )


def _history_panel(watched: Watched) -> Json:
    panel = timeseries(
        watched.label,
        [sql_target(history_sql(watched))],
        UNITS[watched.unit],
        desc=f"`runs.{watched.column}` of each ok run, one line per series; change points are annotations.",
        w=12,
    )
    panel["fieldConfig"]["defaults"]["custom"].update(showPoints="always", pointSize=6, spanNulls=True)
    return on_store(panel)


def change_annotation_sql() -> str:
    """The change points in the time range, as annotations (time, text, tags): regressions and
    improvements, open and closed, each at the first run of its new level."""
    text = (
        "format('%s (%s%s): %s %s%% (%s -> %s %s) in %s at %s; cause: %s', kind, status, "
        "CASE WHEN open THEN '' ELSE ', closed' END, metric_label, to_char(relative_size * 100, 'FMS990.0'), "
        "trim_scale(round(before_median::numeric, 6)), trim_scale(round(after_median::numeric, 6)), unit, "
        "series_key, "
        "first_run_after, COALESCE(cause, 'none'))"
    )
    return (
        f'SELECT first_after_at AS "time", {text} AS text,\n'
        "  concat_ws(',', 'baseline', kind, status, metric) AS tags\n"
        f"FROM changes\nWHERE $__timeFilter(first_after_at) AND {SUITE_FILTER}\n"
        "ORDER BY first_after_at"
    )


OPEN_REGRESSIONS_SQL = (
    'SELECT first_after_at AS "since", series_key AS "series", metric_label AS "metric", status,\n'
    '  relative_size AS "change", before_median AS "median before", after_median AS "median after", unit,\n'
    '  p_value AS "p-value", cause AS "named cause", last_run_before AS "last run before",\n'
    '  first_run_after AS "first run after", detected_at AS "detected"\n'
    f"FROM changes\nWHERE open AND kind = 'regression' AND {SUITE_FILTER}\nORDER BY first_after_at DESC"
)
RUNS_SQL = (
    'SELECT started_at AS "time", series_key AS "series", run_id, status, engine, engine_version,\n'
    "  model, gpu_model, gpu_count\n"
    f"FROM runs\nWHERE $__timeFilter(started_at) AND {RUNS_FILTER}\nORDER BY started_at DESC\nLIMIT 200"
)


# the prefix-cache hit ratio of each run, from the summary JSON the store keeps (docs/prefix-cache.md)
CACHE_SOURCES = (
    ("reported", "summary->'cache'->'reported'->>'hit_ratio'"),
    ("engine counters", "summary->'cache'->>'hit_ratio'"),
    ("implied bound", "summary->'cache'->'implied'->>'hit_ratio'"),
)


def cache_history_sql() -> str:
    """Each stored run's prefix-cache hit ratios over time: what the engine reported per request,
    its own counters over the run, and the bound the workload implies (NULL where a run has none)."""
    cols = ", ".join(f'({path})::float AS "{name}"' for name, path in CACHE_SOURCES)
    known = " OR ".join(f"{path} IS NOT NULL" for _, path in CACHE_SOURCES)
    return (
        f"SELECT $__time(started_at), series_key AS metric, {cols}\n"
        f"FROM runs\nWHERE $__timeFilter(started_at) AND {RUNS_FILTER}\n  AND ({known})\nORDER BY started_at"
    )


def _cache_panel() -> Json:
    panel = timeseries(
        "Prefix-cache hit ratio per run",
        [sql_target(cache_history_sql())],
        "percentunit",
        desc="Share of prompt tokens served from the engine's prefix cache in each run: reported per request "
        "(usage.prompt_tokens_details.cached_tokens), the engine's counters over the run, and the upper "
        "bound the workload's repeated token blocks imply. A run far above its implied bound started warm.",
        w=12,
    )
    panel["fieldConfig"]["defaults"]["custom"].update(showPoints="always", pointSize=6, spanNulls=True)
    return on_store(panel)


def _percent_column(name: str) -> Json:
    return {
        "matcher": {"id": "byName", "options": name},
        "properties": [{"id": "unit", "value": "percentunit"}],
    }


def _store_panels() -> list[Json]:
    regressions = table(
        "Open regressions and their named cause",
        [sql_target(OPEN_REGRESSIONS_SQL, fmt="table")],
        desc="The latest change of a series and metric, worse, from `loadgen baseline check` "
        "(table `changes`); the cause is the top-ranked manifest difference between the last run "
        "before and the first after.",
        h=8,
        overrides=[_percent_column("change")],
    )
    runs = table(
        "Runs in range",
        [sql_target(RUNS_SQL, fmt="table")],
        desc="Every stored run of the selected series (failed, partial and crashed runs are not charted).",
        h=8,
    )
    history = [_history_panel(w) for w in WATCHED.values()]
    return [
        row("Open regressions"),
        on_store(regressions),
        row("History per metric"),
        *history,
        _cache_panel(),
        row("Runs"),
        on_store(runs),
    ]


def _scheduler_panels() -> list[Json]:
    def one(
        title: str,
        expr: str,
        unit: str,
        desc: str,
        thresholds: list[tuple[float | None, str]] | None = None,
        w: int = 4,
    ) -> Json:
        return stat(
            title, [target(expr, "{{suite}}", instant=True)], unit, desc=desc, thresholds=thresholds, w=w
        )

    last_ok = one(
        "Last pass",
        f"max by (suite) (loadgen_baseline_last_pass_success{{{PROM_SUITE}}})",
        "none",
        "ok when the last pass ran every series cleanly (a regression found is still ok), failed otherwise.",
        thresholds=[(None, "red"), (1, "green")],
    )
    last_ok["fieldConfig"]["defaults"]["mappings"] = [
        {
            "type": "value",
            "options": {"0": {"text": "failed", "color": "red"}, "1": {"text": "ok", "color": "green"}},
        }
    ]
    passes = stat(
        "Passes by outcome",
        [
            target(
                f"sum by (outcome) (loadgen_baseline_passes_total{{{PROM_SUITE}}})",
                "{{outcome}}",
                instant=True,
            )
        ],
        "none",
        desc="Passes since the scheduler started: ok, regression (the check found an open confirmed "
        "one), failed.",
        w=6,
    )
    return [
        row("Scheduler (loadgen baseline schedule)"),
        one(
            "Last pass age",
            f"time() - max by (suite) (loadgen_baseline_last_pass_timestamp_seconds{{{PROM_SUITE}}})",
            "s",
            "Since the last pass ended; BaselineStale fires when a due pass has not finished within an hour.",
            thresholds=[(None, "green"), (90000, "orange")],
        ),
        last_ok,
        one(
            "Next pass in",
            f"max by (suite) (loadgen_baseline_next_pass_timestamp_seconds{{{PROM_SUITE}}}) - time()",
            "s",
            "Until the next pass is due (negative while a pass runs: the time since it was due).",
            w=5,
        ),
        passes,
        one(
            "Open regressions",
            f"max by (suite) (loadgen_baseline_regressions_open{{{PROM_SUITE}}})",
            "none",
            "Series x metric whose latest change is a confirmed regression, after the last pass's check.",
            thresholds=[(None, "green"), (1, "red")],
            w=5,
        ),
    ]


def build() -> Json:
    """The Baselines dashboard."""
    variables = [
        store_var(),
        sql_var("suite", "Suite", "SELECT DISTINCT suite FROM runs WHERE suite IS NOT NULL ORDER BY 1"),
        sql_var(
            "series", "Series", "SELECT DISTINCT series_key FROM runs WHERE suite IN ($suite) ORDER BY 1"
        ),
    ]
    annotations = [sql_annotation("Change points (results store)", change_annotation_sql(), "red")]
    return dashboard(
        UID,
        "Baselines",
        [*_scheduler_panels(), *_store_panels()],
        desc="Continuous baselines: each series' history per watched metric with its change points "
        "(results store, PostgreSQL) and the scheduler's health (Prometheus).",
        variables=variables,
        annotations=annotations,
        time_from="now-30d",
        refresh="5m",
        tags=("baseline",),
    )
