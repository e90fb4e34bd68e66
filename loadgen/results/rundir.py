"""Run records on disk: `results/<run_id>/{manifest.json,summary.json,requests.jsonl}` and
`results/runs.csv` (one flat row per run). Every write is atomic (temp file + rename) except the
journal's appends to requests.jsonl while a run goes (loadgen/results/journal.py)."""

from __future__ import annotations

import csv
import io
import json
import os
import secrets
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from loadgen.results.manifest_schema import Manifest, ManifestError, read_manifest
from loadgen.results.run_fields import (
    ManifestLike,
    engine_name,
    engine_version,
    gpu_count,
    gpu_name,
    model_name,
    resolve_params,
)
from loadgen.results.summary import CRASHED_REASON, read_lines, rebuild_summary

RUNS_CSV = "runs.csv"
CSV_COLUMNS = (
    "run_id",
    "started_at",
    "ended_at",
    "partial",
    "partial_reason",
    "target",
    "engine",
    "engine_version",
    "model",
    "scenario",
    "experiment_id",
    "workload",
    "workload_fingerprint",
    "workload_definition_fingerprint",
    "input_len",
    "output_len",
    "mean_prompt_tokens",
    "mean_output_tokens",
    "seed",
    "asked_rate",
    "achieved_rate",
    "arrival",
    "burstiness",
    "max_concurrency",
    "num_prompts",
    "requests_total",
    "requests_ok",
    "requests_failed",
    "requests_cancelled",
    "error_rate",
    "token_count",
    "duration_s",
    "request_throughput",
    "input_token_throughput",
    "output_token_throughput",
    "total_token_throughput",
    "goodput",
    "slo",
    "ttft_mean_s",
    "ttft_p50_s",
    "ttft_p90_s",
    "ttft_p99_s",
    "tpot_mean_s",
    "tpot_p50_s",
    "tpot_p90_s",
    "tpot_p99_s",
    "itl_mean_s",
    "itl_p50_s",
    "itl_p99_s",
    "e2e_mean_s",
    "e2e_p50_s",
    "e2e_p90_s",
    "e2e_p99_s",
    "schedule_lag_p99_s",
    "slot_wait_p99_s",
    "cache_flushed",
    "cache_hit_tokens",
    "cache_hit_ratio",
    "gpu_name",
    "gpu_count",
    "tensor_parallel_size",
    "max_num_seqs",
    "gpu_memory_utilization",
    "tool_version",
    "git_sha",
    "result_dir",
)


class RunNotFound(LookupError):
    """No run with that id under the results directory."""


@dataclass(frozen=True)
class RunRecord:
    """A stored run: its manifest (upgraded to the current schema) and summary, and where its
    per-request lines are."""

    run_id: str
    manifest: dict[str, Any]
    summary: dict[str, Any]
    requests_path: Path

    @property
    def typed(self) -> Manifest:
        """The manifest through the one schema (loadgen.results.manifest_schema)."""
        return read_manifest(self.manifest)


def new_run_id(now: datetime | None = None) -> str:
    """UTC timestamp + short random suffix: unique and sortable, e.g. `20261129T193000Z-3fa9c1`."""
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{secrets.token_hex(3)}"


def current_umask() -> int:
    """The process umask (read from /proc where it can be, so it is never changed, even briefly)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write(path: Path, data: str | bytes | Iterable[str | bytes]) -> None:
    """Write to a temp file in the same directory, fsync, then rename over `path`; the file gets
    the mode a plain `open` would give it (0666 less the umask), not mkstemp's 0600. An iterable of
    strings (or bytes) is written piece by piece (never held whole in memory)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~current_umask())
        with os.fdopen(fd, "wb") as fh:
            if isinstance(data, str | bytes):
                fh.write(data.encode() if isinstance(data, str) else data)
            else:
                for piece in data:
                    fh.write(piece if isinstance(piece, bytes) else piece.encode())
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def sync_file(path: Path) -> None:
    """fsync a file written already (its data on disk, as `atomic_write` leaves a file it writes)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_json(path: Path, obj: Any) -> None:
    """Atomically write pretty JSON (+Inf/NaN written as strings)."""
    atomic_write(path, json.dumps(_jsonable(obj), indent=2, sort_keys=False) + "\n")


_LINE = json.JSONEncoder(separators=(",", ":"), default=str).encode  # one encoder for every line
# orjson's own encodings of dataclasses and datetimes differ from json's: they go to default=str too
_ORJSON_OPTIONS = (
    orjson.OPT_APPEND_NEWLINE | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME
)


def line_text(row: dict[str, Any]) -> str:
    """One JSON Lines line, newline included (finite numbers only: per-request lines have no inf; rows
    of JSON's own types, as per-request lines are). orjson encodes it, ~12x faster than json for a
    32-token request's line, with the same values (floats in their shortest round-trip form either
    way; orjson writes 5e-6 and 0.00001 where json writes 5e-06 and 1e-05); a line it cannot encode,
    or not as ASCII (a non-ASCII string, an integer over 64 bits), is json's, escaped as before."""
    try:
        data = orjson.dumps(row, default=str, option=_ORJSON_OPTIONS)
    except TypeError:  # orjson.JSONEncodeError
        return _LINE(row) + "\n"
    return data.decode("ascii") if data.isascii() else _LINE(row) + "\n"


def write_jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    """Atomically write one JSON object per line."""
    atomic_write(path, "".join(map(line_text, rows)))


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, float) and (obj != obj or obj in (float("inf"), float("-inf"))):
        return str(obj)
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_jsonable(v) for v in obj]
    return obj


def _dig(obj: dict[str, Any], *path: str) -> Any:
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)  # type: ignore[assignment]
    return obj


def csv_row(manifest: ManifestLike, summary: dict[str, Any], result_dir: Path) -> dict[str, Any]:
    """The flat runs.csv row of one run; a field `loadgen diff` also shows (engine, version, model,
    neutral params, GPU) by the same rule (loadgen.results.run_fields)."""
    m = read_manifest(manifest)
    params = resolve_params(m)[0]
    row: dict[str, Any] = {k: summary.get(k) for k in CSV_COLUMNS if k in summary}
    row.update(
        engine=engine_name(m) or summary.get("engine"),
        engine_version=engine_version(m),
        model=model_name(m) or summary.get("model"),
        workload=m.workload.name,
        workload_fingerprint=m.workload.fingerprint,
        workload_definition_fingerprint=m.workload.definition_fingerprint,
        input_len=m.workload.input_len,
        output_len=m.workload.output_len,
        seed=m.config.get("seed"),
        arrival=m.config.get("arrival"),
        burstiness=m.config.get("burstiness"),
        num_prompts=m.config.get("num_prompts"),
        requests_total=_dig(summary, "requests", "measured"),
        requests_ok=_dig(summary, "requests", "ok"),
        requests_failed=_dig(summary, "requests", "failed"),
        requests_cancelled=_dig(summary, "requests", "cancelled"),
        slo=json.dumps(summary.get("slo") or {}),
        gpu_name=gpu_name(m),
        gpu_count=gpu_count(m),
        tensor_parallel_size=params.get("tensor_parallel_size"),
        max_num_seqs=params.get("max_num_seqs"),
        gpu_memory_utilization=params.get("gpu_memory_utilization"),
        tool_version=m.tool.version,
        git_sha=m.tool.git_sha,
        result_dir=str(result_dir),
    )
    for metric in ("ttft", "tpot", "itl", "e2e"):
        for stat in ("mean", "p50", "p90", "p99"):
            key = f"{metric}_{stat}_s"
            if key in CSV_COLUMNS:
                row[key] = _dig(summary, f"{metric}_s", stat)
    row["schedule_lag_p99_s"] = _dig(summary, "schedule_lag_s", "p99")
    row["slot_wait_p99_s"] = _dig(summary, "slot_wait_s", "p99")
    for key in ("flushed", "hit_tokens", "hit_ratio"):
        row[f"cache_{key}"] = m.cache.raw.get(key)
    return {k: row.get(k) for k in CSV_COLUMNS}


def append_runs_csv(results_dir: Path, row: dict[str, Any]) -> Path:
    """Add one row to `results_dir/runs.csv` (header written when the file is new); atomic rewrite.

    A file whose header is another version's (columns added since) is rewritten under the current
    header, its old columns kept at the end, so no row is ever shifted under the wrong name."""
    path = Path(results_dir) / RUNS_CSV
    old = path.read_text() if path.exists() else ""
    old_rows: list[dict[str, str]] = []
    header = next(csv.reader(io.StringIO(old)), None) if old else None
    columns = list(CSV_COLUMNS)
    if header is not None and header != columns:  # written by another version: rewrite it aligned
        old_rows, old = list(csv.DictReader(io.StringIO(path.read_text()))), ""
        columns += [c for c in header if c not in CSV_COLUMNS]
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
    if not old:
        writer.writeheader()
    writer.writerows(old_rows)
    writer.writerow({k: "" if v is None else v for k, v in row.items()})
    atomic_write(path, old + buf.getvalue())
    return path


def probe_writable(results_dir: Path) -> None:
    """Create the results dir and a file in it (then remove it); raises OSError when it cannot."""
    results_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".write-probe.", dir=results_dir)
    os.close(fd)
    os.unlink(tmp)


def load_run(results_dir: str | Path, run_id: str) -> RunRecord:
    """Read a stored run, its manifest through the one reader (upgraded to the current schema); a
    crashed one (manifest, no summary) gets a summary rebuilt from its requests.jsonl, marked
    `partial` and `crashed`. Raises RunNotFound naming the id and directory, ManifestError naming a
    manifest that is no record this loadgen reads."""
    run_dir = Path(results_dir) / run_id
    requests = run_dir / "requests.jsonl"
    if not (run_dir / "manifest.json").is_file():
        raise RunNotFound(f"no run {run_id!r} in {str(results_dir)!r}")
    try:
        manifest = dict(read_manifest(run_dir / "manifest.json").raw)
        if (run_dir / "summary.json").is_file() or manifest.get("status") != "running":
            summary = json.loads((run_dir / "summary.json").read_text())
            return RunRecord(run_id, manifest, summary, requests)
    except FileNotFoundError:
        raise RunNotFound(f"no run {run_id!r} in {str(results_dir)!r}") from None
    lines = read_lines(requests.read_text()) if requests.is_file() else []
    crashed = {**manifest, "status": "crashed", "partial": True, "crashed": True}
    crashed["partial_reason"] = CRASHED_REASON
    return RunRecord(run_id, crashed, rebuild_summary(manifest, lines), requests)


def _is_run(path: Path) -> bool:
    if (path / "summary.json").is_file():
        return True
    try:
        return read_manifest(path / "manifest.json").status == "running"
    except ManifestError:  # no manifest, or none this loadgen reads: not a run to list
        return False


def list_runs(results_dir: str | Path) -> list[str]:
    """Run ids with a summary (or crashed: a start manifest, no summary), oldest first."""
    root = Path(results_dir)
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if _is_run(p))
