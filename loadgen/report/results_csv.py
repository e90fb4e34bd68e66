"""The report's results.csv: one row per run, numbers only in base units (s, req/s, tokens), the unit
in the column name, empty where a figure does not exist (pandas reads it as NaN).

`report.md`'s table shows the same figures formatted for reading; this file is for analysis
(`pandas.read_csv("results.csv")`)."""

from __future__ import annotations

import csv
import io
from typing import Any

from loadgen.analysis.series import Series, run_load
from loadgen.results.run_fields import length_spec
from loadgen.results.rundir import RunRecord

TEXT_COLUMNS = ("run_id", "series", "phase", "load_kind", "input_len_spec", "output_len_spec")
LATENCIES = ("ttft", "tpot", "itl", "e2e")
NUMERIC_COLUMNS = (
    "load",  # the load of `load_kind`: requests/s for rate, requests in flight for concurrency
    "rate_rps",  # the asked rate (inf for --rate inf)
    "concurrency",  # --max-concurrency (empty: no cap)
    "partial",  # 1 when the run was cut short
    "duration_s",
    "requests",  # measured requests
    "ok",
    "errors",
    "cancelled",  # cancelled by loadgen itself (a stop): neither ok nor an error
    "error_rate",  # errors / (ok + errors)
    "request_throughput_rps",
    "output_token_throughput_tps",
    "total_token_throughput_tps",
    "goodput_rps",
    "mean_prompt_tokens",  # measured (usage), per ok request
    "mean_output_tokens",
    *(f"{m}_{s}_s" for m in LATENCIES for s in ("mean", "p50", "p90", "p99")),
    "schedule_lag_p99_s",
    "slot_wait_p99_s",
    "cache_flushed",  # 1 cleared before the run, 0 the clearing failed, empty not asked
    "cache_hit_tokens",  # prompt tokens the engine served from its prefix cache during the run
    "cache_hit_ratio",  # cache_hit_tokens / prompt tokens looked up (the engine's own counters)
)
COLUMNS = (*TEXT_COLUMNS, *NUMERIC_COLUMNS)


def _get(obj: Any, *path: str) -> Any:
    for key in path:
        obj = obj.get(key) if isinstance(obj, dict) else None
    return obj


def _number(value: Any) -> float | int | None:
    """A number, or None for what is not one (absent, null, a display string)."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int | float):
        return value
    try:
        return float(value) if isinstance(value, str) else None
    except ValueError:
        return None


def _latencies(summary: dict[str, Any]) -> dict[str, Any]:
    out = {f"{m}_{s}_s": _get(summary, f"{m}_s", s) for m in LATENCIES for s in ("mean", "p50", "p90", "p99")}
    out["schedule_lag_p99_s"] = _get(summary, "schedule_lag_s", "p99")
    out["slot_wait_p99_s"] = _get(summary, "slot_wait_s", "p99")
    return out


def result_values(record: RunRecord, series: Series) -> dict[str, Any]:
    """One run's row: text columns as text, the rest numbers (None where the figure is absent)."""
    s, m = record.summary, record.typed
    req = s.get("requests") or {}
    text = {
        "run_id": record.run_id,
        "series": series.label,
        "phase": (m.experiment.phase if m.experiment else None) or "",
        "load_kind": series.kind,
        "input_len_spec": length_spec(m, "input_len") or "",
        "output_len_spec": length_spec(m, "output_len") or "",
    }
    numbers = {
        "load": run_load(record, series.kind),
        "rate_rps": s.get("asked_rate"),
        "concurrency": s.get("max_concurrency"),
        "partial": bool(s.get("partial")),
        "duration_s": s.get("duration_s"),
        "requests": req.get("measured"),
        "ok": req.get("ok"),
        "errors": req.get("failed"),
        "cancelled": req.get("cancelled"),
        "error_rate": s.get("error_rate"),
        "request_throughput_rps": s.get("request_throughput"),
        "output_token_throughput_tps": s.get("output_token_throughput"),
        "total_token_throughput_tps": s.get("total_token_throughput"),
        "goodput_rps": s.get("goodput"),
        "mean_prompt_tokens": s.get("mean_prompt_tokens"),
        "mean_output_tokens": s.get("mean_output_tokens"),
        **_latencies(s),
        "cache_flushed": m.cache.raw.get("flushed"),
        "cache_hit_tokens": m.cache.raw.get("hit_tokens"),
        "cache_hit_ratio": m.cache.raw.get("hit_ratio"),
    }
    return {**text, **{k: _number(v) for k, v in numbers.items()}}


def results_csv(rows: list[dict[str, Any]]) -> str:
    """The rows as CSV text (header = COLUMNS; None written as an empty cell)."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(COLUMNS), lineterminator="\n")
    writer.writeheader()
    writer.writerows({k: "" if row.get(k) is None else row[k] for k in COLUMNS} for row in rows)
    return buf.getvalue()
