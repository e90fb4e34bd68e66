"""Assemble a run's manifest and per-request lines, and write the run's files (a failed write is
reported by file name, never raised: the measurements are printed anyway)."""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from itertools import repeat
from operator import mul
from pathlib import Path
from typing import Any, Protocol

import orjson

from infergauge.redact import redact
from loadgen import jsonbytes
from loadgen.config import RunConfig
from loadgen.records import EngineMetadata, RequestRecord
from loadgen.results.manifest import client_info, engine_section, tool_info
from loadgen.results.manifest_schema import MANIFEST_VERSION
from loadgen.results.rundir import (
    RUNS_CSV,
    append_runs_csv,
    atomic_write,
    csv_row,
    line_text,
    sync_file,
    write_json,
)
from loadgen.results.sent import as_sent
from loadgen.results.summary import iso
from loadgen.stats import NS, e2e_s, itls_s, tpot_s, ttft_s
from loadgen.targets import get_target

# the line of a finished request in C (loadgen/_json.c: jsonbytes imports it, None where it is not built
# or LOADGEN_NATIVE=0; then orjson encodes each line, with the same bytes)
_json = jsonbytes._json


@dataclass(frozen=True)
class ManifestFacts:
    """What the runner learned that goes into the manifest."""

    workload: Any
    fingerprint: str
    schedule: Sequence[int]
    meta: EngineMetadata | None
    base_url: str
    exporter: dict[str, Any] | None
    exporter_source: str


def build_manifest(
    config: RunConfig,
    run_id: str,
    facts: ManifestFacts,
    started: datetime,
    ended: datetime,
    stop_reason: str | None,
) -> dict[str, Any]:
    """manifest.json: the facts that explain the numbers; `extra_manifest` is merged on top."""
    sched_hash = hashlib.sha256(",".join(map(str, facts.schedule)).encode()).hexdigest()
    wl = {
        **facts.workload.describe(),
        "fingerprint": facts.fingerprint,
        "num_requests": len(facts.schedule),
        "schedule_fingerprint": f"sha256:{sched_hash}",
        "arrival": config.arrival,
        "rate": config.rate,
        "burstiness": config.burstiness,
        "warmup": config.warmup,
    }
    manifest: dict[str, Any] = {
        "manifest_version": MANIFEST_VERSION,  # the schema (loadgen.results.manifest_schema)
        "run_id": run_id,
        "partial": stop_reason is not None,
        "partial_reason": stop_reason,
        "status": "complete",
        "started_at": iso(started),
        "ended_at": iso(ended),
        "tool": tool_info(),
        "client": client_info(),
        "config": redact(as_sent(config.to_manifest(), facts.workload, get_target(config.target))),
        "workload": wl,
        "engine": engine_section(
            facts.meta,
            facts.base_url,
            facts.exporter,
            config.extra_manifest.get("engine", {}).get("launch_args"),
        ),
        "exporter": facts.exporter,
        "exporter_source": facts.exporter_source,
        "cache": {"flushed": None, "method": None, "detail": None},
        "experiment": None,
    }
    for key, value in config.extra_manifest.items():
        if isinstance(value, dict) and isinstance(manifest.get(key), dict):
            manifest[key] = {**manifest[key], **value}
        else:
            manifest[key] = value
    return manifest


def _rel(t: int | None, start_ns: int) -> float | None:
    # an integer count of ns / 1e9 is already the nearest float to its 9-decimal value: no rounding
    return None if t is None else (t - start_ns) / NS


def request_line(r: RequestRecord, start_ns: int) -> dict[str, Any]:
    """One requests.jsonl line: times in s after the run start (plus raw perf_counter ns), counts, outcome."""
    return {
        "index": r.index,
        "x_request_id": r.x_request_id,
        "warmup": r.warmup,
        "outcome": r.outcome,
        "error": r.error,
        "http_status": r.http_status,
        "scheduled_s": _rel(r.scheduled_ns, start_ns),
        "sent_s": _rel(r.sent_ns, start_ns),
        "first_token_s": _rel(r.first_ns, start_ns),
        "last_token_s": _rel(r.last_ns, start_ns),
        "done_s": _rel(r.done_ns, start_ns),
        "due_s": _rel(r.due_ns, start_ns),
        "schedule_lag_s": r.schedule_lag_ns / NS,
        "slot_wait_s": r.slot_wait_ns / NS,
        "host_stall_s": r.host_stall_ns / NS,  # loadgen's event loop stopped meanwhile (docs/reliability.md)
        "ttft_s": ttft_s(r),
        "tpot_s": tpot_s(r),
        "e2e_s": e2e_s(r),
        "input_len": r.input_len,
        "prompt_tokens": r.prompt_tokens,
        "cached_tokens": r.cached_tokens,
        "output_len": r.output_len,
        "output_tokens": r.output_tokens,
        "token_count": r.token_count,
        "sent_ns": r.sent_ns,
        "first_token_ns": r.first_ns,
        "last_token_ns": r.last_ns,
        **_session_fields(r),
        "itl_s": itls_s(r),  # ns / 1e9: written with at most 9 decimals, as `_rel`; the last field
    }


def _session_fields(r: RequestRecord) -> dict[str, Any]:
    """`session_id` / `turn_index` of a turn of a session (absent for other requests)."""
    if r.session_id is None:
        return {}
    return {"session_id": r.session_id, "turn_index": r.turn_index}


@dataclass(frozen=True)
class Written:
    """Where a run's files went and which could not be written (file name -> reason)."""

    run_dir: Path
    not_written: dict[str, str]


class KnownLines(Protocol):
    """Request lines already encoded, by index (a dict, or the journal's lines on disk)."""

    def get(self, index: int, /) -> str | None:
        """The line of request `index`, None when there is none."""
        ...


_ITL_KEY = b'"itl_s":['


def line_itls_ns(line: bytes) -> list[int]:
    """The ITLs of one requests.jsonl line, in ns: exactly the gaps encoded (`itl_s` is the line's last
    field; a gap of g ns is written as g / 1e9, which round-trips to g). The list is parsed by orjson
    (the same doubles as `float` of each text) and scaled and rounded in C: 2x faster than a float
    parse per token."""
    start = line.rindex(_ITL_KEY) + len(_ITL_KEY) - 1  # from the list's `[`
    return list(map(round, map(mul, orjson.loads(line[start : line.rindex(b"]") + 1]), repeat(NS))))


def request_text(r: RequestRecord, start_ns: int) -> str:
    """One requests.jsonl line, newline included: `request_line` as `line_text` encodes it, by the C
    module where it is built and takes the record (1.7 against 6.7 µs a 32-token line on the VM)."""
    if _json is not None:
        text: str | None = _json.line(r, start_ns)
        if text is not None:
            return text
    return line_text(request_line(r, start_ns))


def _probes() -> list[RequestRecord]:
    """Records whose lines hold every layout the C encoder writes: a float in fixed and exponent
    notation at both ends, integers, nulls, escapes, a session's fields, both kinds of token times."""
    times = [3, 10_003, 10_010, 1_000_010_010, 1_000_020_010]
    ok = RequestRecord(
        0,
        "run-000000",
        False,
        0,
        32,
        32,
        sent_ns=5_000,
        first_ns=20_405_166,
        last_ns=1_175_920_471,
        done_ns=1_175_920_471,
        token_ns=array("q", times),
        prompt_tokens=32,
        output_tokens=3,
        outcome="ok",
        http_status=200,
        host_stall_ns=10_000,
    )
    cut = RequestRecord(
        7,
        'x"\\\n\x01',
        True,
        10**15,
        1,
        2,
        sent_ns=10**15 + 999,
        first_ns=10**15 + 10**9,
        last_ns=10**15 + 10**9 + 7,
        token_ns=[1, 2],
        cached_tokens=0,
        output_tokens=3,
        token_count="estimated",
        outcome="http_error",
        error="HTTP 500: \t\x1f",
        slot_free_ns=10**15 + 12,
        session_id="s-1",
        turn_index=2,
    )
    return [ok, cut, RequestRecord(3, "", False, 0, 0, 0)]


def _checked() -> None:
    """Leave the C encoder out when it does not write the probe lines byte for byte as orjson does
    here: another orjson release may lay out floats differently."""
    global _json
    if _json is not None and any(_json.line(r, 1_000) != line_text(request_line(r, 1_000)) for r in _probes()):
        _json = None


_checked()


def write_run(
    results_dir: Path,
    run_id: str,
    manifest: dict[str, Any],
    summary: dict[str, Any],
    records: Sequence[RequestRecord],
    start_ns: int,
    lines: KnownLines | None = None,
) -> Written:
    """Write requests.jsonl (index order, streamed; `lines` gives texts already encoded: the journal's
    on disk, a merge's), summary.json, manifest.json (marked complete) and the runs.csv row; every
    file is tried."""
    run_dir = results_dir / run_id
    known: KnownLines = lines if lines is not None else {}

    def requests() -> None:
        in_order = getattr(known, "in_order", None)  # the journal's: the final file as it stands?
        if in_order is not None and in_order(records, run_dir / "requests.jsonl"):
            sync_file(run_dir / "requests.jsonl")  # as durable as atomic_write's, without a copy
            return
        blocks = getattr(known, "blocks", None)  # the journal's: its lines copied in long reads
        if blocks is not None:
            atomic_write(
                run_dir / "requests.jsonl", blocks(records, partial(request_text, start_ns=start_ns))
            )
            return
        atomic_write(
            run_dir / "requests.jsonl", (known.get(r.index) or request_text(r, start_ns) for r in records)
        )

    steps: tuple[tuple[str, Callable[[], Any]], ...] = (
        ("requests.jsonl", requests),
        ("summary.json", lambda: write_json(run_dir / "summary.json", summary)),
        ("manifest.json", lambda: write_json(run_dir / "manifest.json", manifest)),
        (RUNS_CSV, lambda: append_runs_csv(results_dir, csv_row(manifest, summary, run_dir))),
    )
    failed: dict[str, str] = {}
    for name, write in steps:
        try:
            write()
        except OSError as exc:
            failed[name] = exc.strerror or type(exc).__name__
    return Written(run_dir, failed)
