"""summary.json from a run's records: at the end of a run, or rebuilt from `requests.jsonl` when the
run was killed before writing it (a *crashed* run), with the same statistics code."""

from __future__ import annotations

import json
from array import array
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loadgen.records import RequestRecord
from loadgen.results.manifest_schema import read_manifest
from loadgen.stats import NS, summarize

if TYPE_CHECKING:
    from loadgen.config import RunConfig
    from loadgen.records import EngineMetadata

CRASHED_REASON = "crashed: the run ended without writing its summary (killed?)"


def iso(t: datetime) -> str:
    """UTC time as written in records: `2026-11-29T19:30:00.000Z`."""
    return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def achieved_rate(records: Sequence[RequestRecord]) -> float | None:
    """Requests sent per second between the first and last measured send: (n - 1) / span."""
    sends = sorted(r.sent_ns for r in records if not r.warmup)
    if len(sends) < 2 or sends[-1] == sends[0]:
        return None
    return (len(sends) - 1) / ((sends[-1] - sends[0]) / NS)


def build_summary(
    config: RunConfig,
    run_id: str,
    records: Sequence[RequestRecord],
    meta: EngineMetadata | None,
    model: str,
    started: datetime,
    ended: datetime,
    stop_reason: str | None,
    peak_in_flight: int,
    itl_ns: array[int] | None = None,
) -> dict[str, Any]:
    """summary.json (docs/CONTRACTS.md layout); `itl_ns`: see `summarize`."""
    head = {
        "run_id": run_id,
        "partial": stop_reason is not None,
        "partial_reason": stop_reason,
        "target": config.target,
        "engine": meta.engine if meta else None,
        "model": model,
        "scenario": config.resolved_scenario,
        "experiment_id": config.experiment_id,
        "started_at": iso(started),
        "ended_at": iso(ended),
        "asked_rate": config.rate,
        "achieved_rate": achieved_rate(records),
        "max_concurrency": config.max_concurrency,
        "peak_in_flight": peak_in_flight,
    }
    return {**head, **summarize(records, config.slo, itl_ns)}


def _ns(seconds: float | None, start_ns: int) -> int | None:
    return None if seconds is None else start_ns + round(seconds * NS)


def record_from_line(line: dict[str, Any]) -> RequestRecord:
    """The RequestRecord a requests.jsonl line was written from (what the statistics read)."""
    sent_ns = int(line["sent_ns"])
    start_ns = sent_ns - round(line["sent_s"] * NS)
    first_ns = line.get("first_token_ns")
    token_ns = [] if first_ns is None else [first_ns]
    for gap in line.get("itl_s") or ():
        token_ns.append(token_ns[-1] + round(gap * NS))
    due_ns = sent_ns - round(line["schedule_lag_s"] * NS)  # lateness is counted from the due time
    slot_wait_ns = round((line.get("slot_wait_s") or 0.0) * NS)
    return RequestRecord(
        index=line["index"],
        x_request_id=line["x_request_id"],
        warmup=line["warmup"],
        scheduled_ns=due_ns - slot_wait_ns,
        slot_free_ns=due_ns if slot_wait_ns > 0 else 0,
        input_len=line["input_len"],
        output_len=line["output_len"],
        sent_ns=sent_ns,
        first_ns=first_ns,
        last_ns=line.get("last_token_ns"),
        done_ns=_ns(line.get("done_s"), start_ns),
        token_ns=token_ns,
        prompt_tokens=line.get("prompt_tokens"),
        cached_tokens=line.get("cached_tokens"),
        output_tokens=line.get("output_tokens") or 0,
        token_count=line.get("token_count") or "usage",
        outcome=line.get("outcome"),
        http_status=line.get("http_status"),
        error=line.get("error"),
    )


def read_lines(text: str) -> list[dict[str, Any]]:
    """The complete lines of a requests.jsonl (a last line cut by a kill is dropped)."""
    return list(parse_lines(text.splitlines()))


def parse_lines(raw_lines: Iterable[str]) -> Iterator[dict[str, Any]]:
    """The one reader of requests.jsonl lines (report, diff, merge, store import): each complete
    line's object; blank lines and a line cut short (a kill or a full disk mid-write) are skipped,
    since only the last line can be torn: the journal appends whole lines."""
    for raw in raw_lines:
        if not raw.strip():
            continue
        try:
            row = json.loads(raw)
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict):
            yield row


def iter_lines(path: Path) -> Iterator[dict[str, Any]]:
    """`parse_lines` over a requests.jsonl file, streamed (nothing when the file is missing)."""
    if not path.is_file():
        return
    with path.open(errors="replace") as fh:
        yield from parse_lines(fh)


def rebuild_summary(manifest: dict[str, Any], lines: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The summary of a crashed run from its start manifest and request lines: partial, crashed."""
    m = read_manifest(manifest)
    records = sorted(map(record_from_line, lines), key=lambda r: r.index)
    cfg, engine = m.config, m.engine
    started = datetime.fromisoformat(str(m.started_at).replace("Z", "+00:00"))
    span_s = max((x.get("done_s") or x.get("sent_s") or 0.0 for x in lines), default=0.0)
    rate = cfg.get("rate")
    head = {
        "run_id": m.run_id or None,
        "partial": True,
        "partial_reason": CRASHED_REASON,
        "crashed": True,
        "target": cfg.get("target"),
        "engine": engine.engine,
        "model": cfg.get("model") or engine.model,
        "scenario": cfg.get("scenario"),
        "experiment_id": cfg.get("experiment_id"),
        "started_at": iso(started),
        "ended_at": iso(started + timedelta(seconds=span_s)),
        "asked_rate": float(rate) if rate is not None else None,
        "achieved_rate": achieved_rate(records),
        "max_concurrency": cfg.get("max_concurrency"),
        "peak_in_flight": None,
    }
    return {**head, **summarize(records, cfg.get("slo") or {})}
