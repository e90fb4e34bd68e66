"""Markdown report after the seed's template (5.4): id, date, purpose, environment, parameters,
results (table + CSV), charts, and the facts a conclusion rests on (knee, throughput at the SLA,
cost per million tokens, production advice)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadgen.analysis.facts import series_facts
from loadgen.analysis.series import Series, group_series, run_load
from loadgen.analysis.slo import Objective, format_seconds
from loadgen.report.charts import write_charts
from loadgen.report.results_csv import result_values, results_csv
from loadgen.results.manifest_schema import Manifest, read_manifest
from loadgen.results.run_fields import (
    ManifestLike,
    engine_name,
    engine_version,
    gpu_count,
    gpu_name,
    length_spec,
    model_name,
    resolve_params,
)
from loadgen.results.rundir import RunRecord, atomic_write
from loadgen.targets.cache_counters import cache_warning

RESULT_COLUMNS = (
    "run_id",
    "series",
    "phase",
    "load",
    "req/s",
    "output tok/s",
    "input tok/req (set / sent)",
    "output tok/req (set / sent)",
    "TTFT p50",
    "TTFT p99",
    "TPOT p50",
    "TPOT p99",
    "E2E p50",
    "E2E p99",
    "goodput req/s",
    "errors",
    "cache cleared",
    "cache hits",
)


@dataclass(frozen=True)
class ReportOptions:
    """What the report is about and what it should compute."""

    title: str
    purpose: str = ""
    experiment_ids: tuple[str, ...] = ()
    objective: Objective | None = None
    cost_per_hour: float | None = None


def _get(obj: Any, *path: str) -> Any:
    for key in path:
        obj = obj.get(key) if isinstance(obj, dict) else None
    return obj


def _fmt(value: Any, digits: int = 2) -> str:
    if value is None or value == "":
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _cache(manifest: Manifest) -> str:
    flushed, method = manifest.cache.flushed, manifest.cache.method or ""
    if flushed is None:
        return "-"
    return f"yes ({method})" if flushed else f"NO ({method})"


def _cache_hits(manifest: Manifest) -> str:
    """`19200 (75%)`: prompt tokens the engine served from its prefix cache during the run."""
    hits, ratio = manifest.cache.raw.get("hit_tokens"), manifest.cache.raw.get("hit_ratio")
    return "-" if hits is None else f"{hits} ({_fmt((ratio or 0) * 100, 0)}%)"


def _set_sent(configured: Any, measured: Any) -> str:
    """`fixed:64 / 119`: the configured length beside the mean measured per request (usage)."""
    return f"{configured or '-'} / {_fmt(measured, 0)}"


def result_row(record: RunRecord, series: Series) -> dict[str, str]:
    """One results-table row of report.md, formatted for reading (results.csv has the numbers)."""
    s, m = record.summary, record.typed
    names = (("TTFT", "ttft_s"), ("TPOT", "tpot_s"), ("E2E", "e2e_s"))
    lat = {
        f"{name} {stat}": format_seconds(_get(s, key, stat)) for name, key in names for stat in ("p50", "p99")
    }
    return {
        "run_id": record.run_id,
        "series": series.label,
        "phase": (m.experiment.phase if m.experiment else None) or "-",
        "load": f"{run_load(record, series.kind):g} {'conc' if series.kind == 'concurrency' else 'req/s'}",
        "req/s": _fmt(s.get("request_throughput")),
        "output tok/s": _fmt(s.get("output_token_throughput"), 1),
        "input tok/req (set / sent)": _set_sent(length_spec(m, "input_len"), s.get("mean_prompt_tokens")),
        "output tok/req (set / sent)": _set_sent(length_spec(m, "output_len"), s.get("mean_output_tokens")),
        **lat,
        "goodput req/s": _fmt(s.get("goodput")),
        "errors": f"{_get(s, 'requests', 'failed') or 0} ({_fmt((s.get('error_rate') or 0) * 100, 1)}%)",
        "cache cleared": _cache(m),
        "cache hits": _cache_hits(m),
    }


def _table(columns: tuple[str, ...] | list[str], rows: list[dict[str, str]]) -> list[str]:
    out = ["| " + " | ".join(columns) + " |", "|" + " --- |" * len(columns)]
    out += ["| " + " | ".join(row.get(c, "-") for c in columns) + " |" for row in rows]
    return out


def _environment(records: list[RunRecord]) -> list[str]:
    rows: dict[tuple[str, ...], dict[str, str]] = {}
    for r in records:
        m = r.typed
        gpus = m.exporter.gpus
        gpu = gpus[0] if gpus else {}
        row = {
            "engine": f"{engine_name(m) or r.summary.get('target') or '-'} {engine_version(m) or ''}".strip(),
            "model": str(model_name(m) or r.summary.get("model") or "-"),
            "GPU": f"{gpu_count(m)} x {gpu_name(m)}" if gpus else "- (no exporter)",
            "driver / CUDA": f"{gpu.get('driver_version', '-')} / {gpu.get('cuda_version', '-')}",
            "interconnect": str(_get(m.exporter_raw(), "topology", "interconnect") or "-"),
            "client": f"{m.client.hostname or '-'} ({m.client.cpu_model or '-'})",
            "infergauge": f"{m.tool.version or '-'}",
        }
        sha = str(m.tool.git_sha or "")[:10]
        kept = rows.setdefault(tuple(row.values()), row)
        if sha and sha not in kept["infergauge"]:  # several commits: list them, one row
            kept["infergauge"] += f" {sha}"
    return _table(
        ["engine", "model", "GPU", "driver / CUDA", "interconnect", "client", "infergauge"],
        list(rows.values()),
    )


def _parameters(series: list[Series]) -> list[str]:
    rows = []
    for s in series:
        m = s.records[0].typed
        cfg, params = m.config, resolve_params(m)[0]  # the rule runs.csv and diff read them by
        rows.append(
            {
                "series": s.label,
                "TP": _fmt(params.get("tensor_parallel_size")),
                "max_num_seqs": _fmt(params.get("max_num_seqs")),
                "memory fraction": _fmt(params.get("gpu_memory_utilization")),
                "max model len": _fmt(params.get("max_model_len")),
                "input / output len": f"{cfg.get('input_len', '-')} / {cfg.get('output_len', '-')}",
                f"{s.kind} points": ", ".join(f"{p.load:g}" for p in s.points()),
                "requests/run": _per_run(cfg),
                "seed": _fmt(cfg.get("seed")),
            }
        )
    columns = ["series", "TP", "max_num_seqs", "memory fraction", "max model len", "input / output len"]
    kinds = sorted({f"{s.kind} points" for s in series})
    return _table([*columns, *kinds, "requests/run", "seed"], rows)


def _per_run(cfg: Mapping[str, Any]) -> str:
    if cfg.get("num_prompts"):
        return str(cfg["num_prompts"])
    return f"{cfg['duration_s']:g} s of sending" if cfg.get("duration_s") else "-"


def _dates(records: list[RunRecord]) -> str:
    starts = sorted(str(r.summary.get("started_at") or "") for r in records)
    ends = sorted(str(r.summary.get("ended_at") or "") for r in records)
    return f"{starts[0]} to {ends[-1]}" if starts and ends else "-"


def write_report(records: list[RunRecord], out_dir: Path, options: ReportOptions) -> Path:
    """Write report.md, results.csv and the PNG charts into out_dir; returns report.md's path."""
    series = group_series(records)
    ordered = [(r, s) for s in series for r in sorted(s.records, key=lambda r: run_load(r, s.kind))]
    rows = [result_row(r, s) for r, s in ordered]
    charts = write_charts(series, out_dir, options.objective)
    atomic_write(out_dir / "results.csv", results_csv([result_values(r, s) for r, s in ordered]))
    lines = [
        f"# Benchmark report: {options.title}",
        "",
        f"- **Experiment id:** {', '.join(options.experiment_ids) or '- (single runs)'}",
        f"- **Date:** {_dates(records)}",
        f"- **Purpose:** {options.purpose or '-'}",
        f"- **Runs:** {len(records)} in {len(series)} series; "
        f"SLA: {options.objective.label if options.objective else 'none given'}",
        "",
        "## Environment",
        "",
        *_environment(records),
        "",
        "## Parameters",
        "",
        *_parameters(series),
        "",
        "## Results",
        "",
        "Latencies are exact percentiles over the measured requests "
        "(definitions as `vllm bench serve`); tokens per request: configured / measured mean (usage). "
        "The same figures as numbers, in base units, in `results.csv`.",
        "",
        *_table(RESULT_COLUMNS, rows),
        "",
        "## Charts",
        "",
        *[f"![{c.stem}]({c.name})" for c in charts],
        "",
        "## Facts for the conclusion",
        "",
    ]
    for s in series:
        lines += [f"### {s.label}", "", *series_facts(s, options.objective, options.cost_per_hour), ""]
    lines += _warnings(records)
    path = out_dir / "report.md"
    atomic_write(path, "\n".join(lines).rstrip() + "\n")
    return path


def _warnings(records: list[RunRecord]) -> list[str]:
    notes = [
        f"- run {r.run_id} is partial: {r.summary.get('partial_reason') or 'interrupted'}"
        for r in records
        if r.summary.get("partial")
    ]
    notes += [
        f"- run {r.run_id}: the prefix cache could not be cleared before it ran "
        f"({r.typed.cache.raw.get('detail') or 'no detail'})"
        for r in records
        if r.typed.cache.flushed is False
    ]
    notes += [f"- {warning.removeprefix('warning: ')}" for warning in _warm_runs(records)]
    notes += workload_mismatches(records)
    notes += _exporter_checks(records)
    return ["## Warnings", "", *notes] if notes else []


def _warm_runs(records: list[RunRecord]) -> list[str]:
    warnings = (cache_warning(r.run_id, r.typed.cache.raw) for r in records)
    return [w for w in warnings if w]


def definition_of(manifest: ManifestLike) -> str:
    """The workload-definition fingerprint (generator, options, seed); runs recorded before it
    existed fall back to the fingerprint of the requests sent."""
    wl = read_manifest(manifest).workload
    return str(wl.definition_fingerprint or wl.fingerprint)


def workload_mismatches(records: list[RunRecord]) -> list[str]:
    """Runs side by side (same phase, workload and load) must come from one workload definition
    (how many requests each sent may differ: a duration-bounded run sends what fits)."""
    groups: dict[tuple[str, str, str], dict[str, list[str]]] = {}
    for r in records:
        exp = r.typed.experiment
        key = (
            str((exp.phase if exp else None) or "-"),
            str((exp.workload if exp else None) or r.summary.get("scenario")),
            f"{r.summary.get('max_concurrency')}/{r.summary.get('asked_rate')}",
        )
        groups.setdefault(key, {}).setdefault(definition_of(r.typed), []).append(r.run_id)
    return [
        f"- runs compared in phase {phase}, workload {workload} used different workloads "
        f"(definitions differ: {'; '.join(', '.join(ids) for ids in by_fp.values())}): not comparable"
        for (phase, workload, _), by_fp in groups.items()
        if len(by_fp) > 1
    ]


def _exporter_checks(records: list[RunRecord]) -> list[str]:
    """The exporter's warnings and errors (throttling, leftover GPU processes, ...), once each."""
    seen: dict[str, list[str]] = {}
    for r in records:
        for check in r.typed.exporter.checks:
            if check.get("severity") in ("warning", "error"):
                text = f"{check['severity']}: {check.get('message') or check.get('id')}"
                seen.setdefault(text, []).append(r.run_id)
    return [f"- exporter {text} (runs {', '.join(ids)})" for text, ids in seen.items()]
