"""One dashboard per registered engine, built from its metric roles alone (infergauge/engines/*.py).

Each role's metric is drawn by its kind and unit: gauges as they are (requests gauges of the
scheduler together), counters as rates (a `split_by` label gets a series each), histograms as
p50/p90/p99, info series as a table; prefix-cache hits over queries as a ratio where the engine has
both. Panels follow the order of the engine file, grouped into rows; no name of an engine or of one
of its metrics is written here, so a new engine file gets its dashboard with no other edit.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from infergauge import engines
from infergauge.engines.base import EngineSpec
from infergauge.engines.metrics import Metric, title

from .board import dashboard, multi_var
from .common import info_table, organize, quantile_pairs, series
from .panels import Json, row, targets, timeseries

UNITS = {
    "seconds": "s",
    "ratio": "percentunit",
    "tokens/s": "suffix: tok/s",
    "requests": "short",
    "tokens": "short",
}
RATE_UNITS = {"tokens": "suffix: tok/s", "requests": "reqps", "seconds": "percentunit", "": "short"}


def _selector(spec: EngineSpec) -> str:
    model = f', {spec.model_label}=~"$model_name"' if spec.model_label else ""
    return f'instance=~"$instance"{model}'


def _panel(spec: EngineSpec, role: str, metric: Metric) -> Json:
    sel = _selector(spec)
    name, heading = metric.name, title(role, metric)
    if metric.kind == "histogram":
        pairs = quantile_pairs(f"{name}_bucket{{{sel}}}")
        return timeseries(heading, targets(*pairs), UNITS.get(metric.unit, "short"), desc=metric.help, w=8)
    if metric.kind == "counter":
        by = metric.split_by or "instance"
        expr = f"sum by ({by}) (rate({name}{{{sel}}}[$__rate_interval]))"
        unit = RATE_UNITS.get(metric.unit, "short")
        return series(
            heading, expr, f"{{{{{by}}}}}", unit, desc=metric.help, w=8, stack=bool(metric.split_by)
        )
    how = "max" if metric.unit == "ratio" else "sum"
    expr = f"{how} by (instance) ({name}{{{sel}}})"
    return series(heading, expr, "{{instance}}", UNITS.get(metric.unit, "short"), desc=metric.help, w=8)


def _requests_panel(spec: EngineSpec, gauges: list[tuple[str, Metric]]) -> Json:
    sel = _selector(spec)
    pairs = [
        (f"sum by (instance) ({m.name}{{{sel}}})", f"{title(r, m).lower()} {{{{instance}}}}")
        for r, m in gauges
    ]
    names = [title(r, m).removesuffix(" requests") for r, m in gauges]
    heading = " and ".join([names[0], *(n.lower() for n in names[1:])]) + " requests"
    return timeseries(heading, targets(*pairs), "short", w=8)


def _hit_ratio(spec: EngineSpec) -> list[Json]:
    hits, queries = spec.metrics.get("prefix_cache_hits"), spec.metrics.get("prefix_cache_queries")
    if hits is None or queries is None:
        return []
    sel = _selector(spec)
    rate = "sum by (instance) (rate({}{{" + sel + "}}[$__rate_interval]))"
    expr = f"{rate.format(hits.name)} / {rate.format(queries.name)}"
    desc = "Tokens served from the prefix cache / tokens looked up."
    return [series("Prefix-cache hit ratio", expr, "{{instance}}", "percentunit", desc=desc, w=8)]


def _panels(spec: EngineSpec) -> list[Json]:
    roles = list(spec.metrics.items())
    gauges = [
        (r, m) for r, m in roles if m.kind == "gauge" and m.unit == "requests" and r in ("running", "waiting")
    ]
    out: list[Json] = [row("Scheduler")]
    if gauges:
        out.append(_requests_panel(spec, gauges))
    rest = [(r, m) for r, m in roles if (r, m) not in gauges and m.kind in ("gauge", "counter")]
    out += [_panel(spec, r, m) for r, m in rest if m.unit == "requests"]
    cache = _hit_ratio(spec) + [
        _panel(spec, r, m) for r, m in rest if m.unit != "requests" and not r.startswith("prefix_cache_")
    ]
    if cache:
        out += [row("Cache, tokens and time"), *cache]
    latency = [_panel(spec, r, m) for r, m in roles if m.kind == "histogram"]
    if latency:
        out += [row("Latency (server-side)"), *latency]
    for metric in (m for _, m in roles if m.kind == "info"):
        query = f'max without (job, __name__) ({metric.name}{{instance=~"$instance"}})'
        hidden = organize({"Time": True, "Value": True})
        out += [
            row("Configuration"),
            info_table(metric.title or metric.name, query, transformations=hidden, h=6),
        ]
    return out


def _variables(spec: EngineSpec) -> list[Json]:
    probe = next(m.name for m in spec.metrics.values() if m.kind != "histogram")
    found = [multi_var("instance", "Instance", f"label_values({probe}, instance)")]
    if spec.model_label:
        query = f'label_values({probe}{{instance=~"$instance"}}, {spec.model_label})'
        found.append(multi_var("model_name", "Model", query))
    return found


def build(spec: EngineSpec) -> Json:
    """The dashboard of one engine's own /metrics."""
    return dashboard(
        f"infergauge-engine-{spec.name}",
        f"Engine: {spec.title}",
        _panels(spec),
        desc=f"{spec.title}'s own /metrics, drawn from the metric roles of its engine file: "
        "scheduler, cache and tokens, server-side latency.",
        variables=_variables(spec),
        time_from="now-1h",
        tags=("engine", spec.name),
    )


def engine_specs() -> list[EngineSpec]:
    """The engines that get a dashboard: every registered engine that is not a simulator and has metrics."""
    return [spec for spec in engines.ENGINES.values() if not spec.plays and spec.metrics]


def builders() -> dict[str, Callable[[], Json]]:
    """`engine-<name>.json` -> its builder, for every engine in the registry now."""
    return {f"engine-{spec.name}.json": partial(build, spec) for spec in engine_specs()}
