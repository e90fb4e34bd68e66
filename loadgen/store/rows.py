"""Pure row building: a run's manifest + summary -> the values of its `runs` row (no I/O)."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable
from datetime import datetime
from typing import Any

from loadgen.results.manifest import public_url
from loadgen.results.manifest_schema import as_dict, read_manifest
from loadgen.results.run_fields import (
    ManifestLike,
    engine_name,
    engine_version,
    gpu_count,
    gpu_name,
    model_name,
)

Doc = dict[str, Any]


def dig(obj: Any, *path: str) -> Any:
    """obj[path[0]][path[1]]...; None where a level is missing or not a mapping."""
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def number(value: Any) -> float | None:
    """A finite float, else None (a Grafana panel cannot chart `inf`, a string or a flag)."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        out = float(value)
    except ValueError:
        return None
    return out if math.isfinite(out) else None


def integer(value: Any) -> int | None:
    """An int from a finite number, else None."""
    out = number(value)
    return None if out is None else int(out)


def timestamp(value: Any) -> datetime | None:
    """`2026-12-01T07:48:33.726Z` -> an aware datetime; None when absent or unreadable."""
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def run_status(manifest: ManifestLike, summary: Doc) -> str:
    """crashed | partial | failed (error rate over the run's budget) | ok."""
    m = read_manifest(manifest)
    if crashed(m, summary):
        return "crashed"
    if summary.get("partial") or m.partial:
        return "partial"
    budget, rate = number(m.config.get("max_error_rate")), number(summary.get("error_rate"))
    return "failed" if budget is not None and rate is not None and rate > budget else "ok"


def crashed(manifest: ManifestLike, summary: Doc) -> bool:
    """Whether the run's record says loadgen died before finishing it."""
    return bool(summary.get("crashed") or read_manifest(manifest).crashed)


def series_key(manifest: ManifestLike, summary: Doc) -> str:
    """A series' identity: its suite entry (else target/model/workload/load) plus GPU model and count."""
    m = read_manifest(manifest)
    suite, entry = m.baseline.get("suite"), m.baseline.get("series")
    if suite and entry:
        what = f"{suite}/{entry}"
    else:
        fingerprint = str(m.workload.fingerprint or "-")
        load = f"rate={summary.get('asked_rate')},conc={summary.get('max_concurrency')}"
        what = f"{summary.get('target')}/{summary.get('model')}/{fingerprint[:19]}/{load}"
    found = m.exporter.gpus
    gpu = f"{found[0].get('name')}x{len(found)}" if found else "no-gpu-facts"
    return f"{what}@{gpu}"


def finite_json(obj: Any) -> Any:
    """`obj` with non-finite floats as strings ("inf"), as the run folders write them: JSONB takes
    no NaN or Infinity, and a row built from memory must equal the one built from the folder."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return str(obj)
    if isinstance(obj, dict):
        return {str(k): finite_json(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [finite_json(v) for v in obj]
    return obj


def content_hash(manifest: Doc, summary: Doc) -> str:
    """sha256 of the canonical JSON of manifest + summary: equal when nothing in the record changed."""
    text = json.dumps([manifest, summary], sort_keys=True, separators=(",", ":"), default=str)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


_FIGURES: dict[str, Callable[[Doc], Any]] = {
    "duration_s": lambda s: number(s.get("duration_s")),
    "requests_ok": lambda s: integer(dig(s, "requests", "ok")),
    "requests_failed": lambda s: integer(dig(s, "requests", "failed")),
    "error_rate": lambda s: number(s.get("error_rate")),
    "request_throughput": lambda s: number(s.get("request_throughput")),
    "output_throughput": lambda s: number(s.get("output_token_throughput")),
    "total_token_throughput": lambda s: number(s.get("total_token_throughput")),
    "goodput": lambda s: number(s.get("goodput")),
}


def _percentile(metric: str, stat: str) -> Callable[[Doc], float | None]:
    return lambda s: number(dig(s, f"{metric}_s", stat))


_FIGURES.update(
    {f"{m}_{p}_s": _percentile(m, p) for m in ("ttft", "tpot", "itl", "e2e") for p in ("p50", "p99")}
)


def shard_of(manifest: ManifestLike) -> str | None:
    """`i/N` when the record is one shard of a sharded run (`loadgen run --shard`), else None."""
    section = as_dict(read_manifest(manifest).raw.get("shard"))
    index, count = integer(section.get("index")), integer(section.get("count"))
    return None if index is None or count is None else f"{index}/{count}"


def row_key(run_id: str, shard: str | None) -> str:
    """The row's key: the run id, or `<run_id>/shard-<i>` for a shard (its merged run has the id)."""
    return run_id if shard is None else f"{run_id}/shard-{shard.split('/')[0]}"


def build_row(manifest: ManifestLike, summary: Doc) -> Doc:
    """The `runs` row of one run record (every column of schema.RUNS_COLUMNS), the manifest read
    through the one schema (stored upgraded) and the fields runs.csv also shows by its rules."""
    m = read_manifest(finite_json(dict(read_manifest(manifest).raw)))
    summary = finite_json(summary)
    url = m.engine.base_url or m.config.get("base_url")
    row: Doc = {
        "run_id": summary.get("run_id") or m.run_id,
        "started_at": timestamp(summary.get("started_at") or m.started_at),
        "ended_at": timestamp(summary.get("ended_at") or m.ended_at),
        "suite": m.baseline.get("suite"),
        "series_key": series_key(m, summary),
        "status": run_status(m, summary),
        "partial": bool(summary.get("partial") or m.partial or crashed(m, summary)),
        "partial_reason": summary.get("partial_reason") or m.partial_reason,
        "crashed": crashed(m, summary),
        "experiment_id": summary.get("experiment_id"),
        "scenario": summary.get("scenario"),
        "target": summary.get("target") or m.config.get("target"),
        "base_url": public_url(url) if isinstance(url, str) else None,
        "engine": engine_name(m) or summary.get("engine"),
        "engine_version": engine_version(m),
        "model": summary.get("model") or model_name(m),
        "gpu_model": gpu_name(m),
        "gpu_count": gpu_count(m),
        "workload": m.workload.name,
        "workload_fingerprint": m.workload.fingerprint,
        "asked_rate": number(summary.get("asked_rate")),
        "max_concurrency": integer(summary.get("max_concurrency")),
        **{name: figure(summary) for name, figure in _FIGURES.items()},
        "tool_version": m.tool.version,
        "manifest": dict(m.raw),
        "summary": summary,
        "row_hash": content_hash(dict(m.raw), summary),
        "shard": shard_of(m),
    }
    if not row["run_id"]:
        raise ValueError("the record names no run_id")
    row["run_id"] = row_key(str(row["run_id"]), row["shard"])
    return row
