"""Pure row building: a run's manifest + summary -> the values of its `runs` row (no I/O)."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable
from datetime import datetime
from typing import Any

from loadgen.results.manifest import public_url

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


def run_status(manifest: Doc, summary: Doc) -> str:
    """crashed | partial | failed (error rate over the run's budget) | ok."""
    if crashed(manifest, summary):
        return "crashed"
    if summary.get("partial") or manifest.get("partial"):
        return "partial"
    budget, rate = number(dig(manifest, "config", "max_error_rate")), number(summary.get("error_rate"))
    return "failed" if budget is not None and rate is not None and rate > budget else "ok"


def crashed(manifest: Doc, summary: Doc) -> bool:
    """Whether the run's record says loadgen died before finishing it."""
    return bool(summary.get("crashed") or manifest.get("crashed"))


def gpus(manifest: Doc) -> list[Doc]:
    """The GPUs the exporter reported for the run ([] without an exporter)."""
    found = dig(manifest, "exporter", "gpus")
    return [g for g in found if isinstance(g, dict)] if isinstance(found, list) else []


def series_key(manifest: Doc, summary: Doc) -> str:
    """A series' identity: its suite entry (else target/model/workload/load) plus GPU model and count."""
    suite, entry = dig(manifest, "baseline", "suite"), dig(manifest, "baseline", "series")
    if suite and entry:
        what = f"{suite}/{entry}"
    else:
        fingerprint = str(dig(manifest, "workload", "fingerprint") or "-")
        load = f"rate={summary.get('asked_rate')},conc={summary.get('max_concurrency')}"
        what = f"{summary.get('target')}/{summary.get('model')}/{fingerprint[:19]}/{load}"
    found = gpus(manifest)
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


def shard_of(manifest: Doc) -> str | None:
    """`i/N` when the record is one shard of a sharded run (`loadgen run --shard`), else None."""
    index, count = integer(dig(manifest, "shard", "index")), integer(dig(manifest, "shard", "count"))
    return None if index is None or count is None else f"{index}/{count}"


def row_key(run_id: str, shard: str | None) -> str:
    """The row's key: the run id, or `<run_id>/shard-<i>` for a shard (its merged run has the id)."""
    return run_id if shard is None else f"{run_id}/shard-{shard.split('/')[0]}"


def build_row(manifest: Doc, summary: Doc) -> Doc:
    """The `runs` row of one run record (every column of schema.RUNS_COLUMNS)."""
    manifest, summary = finite_json(manifest), finite_json(summary)
    engine, found = manifest.get("engine") or {}, gpus(manifest)
    url = engine.get("base_url") or dig(manifest, "config", "base_url")
    row: Doc = {
        "run_id": summary.get("run_id") or manifest.get("run_id"),
        "started_at": timestamp(summary.get("started_at") or manifest.get("started_at")),
        "ended_at": timestamp(summary.get("ended_at") or manifest.get("ended_at")),
        "suite": dig(manifest, "baseline", "suite"),
        "series_key": series_key(manifest, summary),
        "status": run_status(manifest, summary),
        "partial": bool(summary.get("partial") or manifest.get("partial") or crashed(manifest, summary)),
        "partial_reason": summary.get("partial_reason") or manifest.get("partial_reason"),
        "crashed": crashed(manifest, summary),
        "experiment_id": summary.get("experiment_id"),
        "scenario": summary.get("scenario"),
        "target": summary.get("target") or dig(manifest, "config", "target"),
        "base_url": public_url(url) if isinstance(url, str) else None,
        "engine": engine.get("engine") or summary.get("engine"),
        "engine_version": engine.get("version"),
        "model": summary.get("model") or engine.get("model"),
        "gpu_model": found[0].get("name") if found else None,
        "gpu_count": len(found) or None,
        "workload": dig(manifest, "workload", "name"),
        "workload_fingerprint": dig(manifest, "workload", "fingerprint"),
        "asked_rate": number(summary.get("asked_rate")),
        "max_concurrency": integer(summary.get("max_concurrency")),
        **{name: figure(summary) for name, figure in _FIGURES.items()},
        "tool_version": dig(manifest, "tool", "version"),
        "manifest": manifest,
        "summary": summary,
        "row_hash": content_hash(manifest, summary),
        "shard": shard_of(manifest),
    }
    if not row["run_id"]:
        raise ValueError("the record names no run_id")
    row["run_id"] = row_key(str(row["run_id"]), row["shard"])
    return row
