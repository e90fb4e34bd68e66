"""Trace files parsed into rows, checked line by line: every error is `FILE:LINE: what is wrong`.

Formats (detected from the first record, or named with `--trace-format`):
- mooncake: JSONL `{"timestamp": ms, "input_length": N, "output_length": M, "hash_ids": [...]}`,
  512-token blocks (Mooncake's published traces);
- alibaba: the same keys with `timestamp` in seconds and 16-token blocks, plus `chat_id` /
  `parent_chat_id` linking the turns of one conversation (its sessions);
- azure: the Azure LLM inference trace CSV, header `TIMESTAMP,ContextTokens,GeneratedTokens`
  (TIMESTAMP a date-time; no hash ids: every prompt is unique);
- infergauge: JSONL `{"t": s, "input_len": N, "output_len": M, "hash_ids": [...]?, "session_id": "s"?}`
  with an optional first line `{"format": "infergauge-trace", "block_size": 16}`.
Reading (bytes) is apart from parsing (`parse_trace`, pure).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from loadgen.config import ConfigError
from loadgen.workload.dataset import json_line

BLOCK_SIZES = {"mooncake": 512, "alibaba": 16, "azure": 16, "infergauge": 16}
TIME_UNITS = {"mooncake": "ms", "alibaba": "s", "azure": "s", "infergauge": "s"}
INFERGAUGE_HEADER = "infergauge-trace"


@dataclass(frozen=True)
class TraceRow:
    """One request of a trace: its time (seconds on the trace's clock), lengths, blocks, session."""

    line: int
    t_s: float
    input_len: int
    output_len: int
    hash_ids: tuple[int, ...] | None = None
    session: str | None = None


@dataclass(frozen=True)
class ParsedTrace:
    """The rows in file order, the format they were read as and the block size it declares."""

    fmt: str
    rows: list[TraceRow]
    block_size: int | None = None  # declared by the file (an infergauge header), else None


def _int(raw: dict[str, Any], key: str, where: str, minimum: int = 1) -> int:
    value = raw.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{where}: field {key!r} must be an integer >= {minimum}, got {value!r}")
    return value


def _number(raw: dict[str, Any], key: str, where: str) -> float:
    value = raw.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value or value < 0:
        raise ConfigError(f"{where}: field {key!r} must be a number >= 0, got {value!r}")
    return float(value)


def _hash_ids(raw: dict[str, Any], where: str, required: bool) -> tuple[int, ...] | None:
    value = raw.get("hash_ids")
    if value is None and not required:
        return None
    if not isinstance(value, list) or not all(isinstance(h, int) and not isinstance(h, bool) for h in value):
        raise ConfigError(f"{where}: field 'hash_ids' must be a list of integers, got {str(value)[:60]}")
    return tuple(value)


def _mooncake(raw: dict[str, Any], where: str, line: int, scale: float) -> TraceRow:
    # Alibaba's chat_id (its root conversation resolved by `_sessions`), or a session_id some tools write
    session = raw.get("chat_id", raw.get("session_id"))
    return TraceRow(
        line,
        _number(raw, "timestamp", where) * scale,
        _int(raw, "input_length", where),
        _int(raw, "output_length", where),
        _hash_ids(raw, where, required=True),
        None if session is None else str(session),
    )


def _infergauge(raw: dict[str, Any], where: str, line: int, scale: float) -> TraceRow:
    session = raw.get("session_id")
    if session is not None and not isinstance(session, str | int):
        raise ConfigError(f"{where}: field 'session_id' must be text or an integer, got {session!r}")
    return TraceRow(
        line,
        _number(raw, "t", where) * scale,
        _int(raw, "input_len", where),
        _int(raw, "output_len", where),
        _hash_ids(raw, where, required=False),
        None if session is None else str(session),
    )


ROW_PARSERS: dict[str, Callable[[dict[str, Any], str, int, float], TraceRow]] = {
    "mooncake": _mooncake,
    "alibaba": _mooncake,
    "infergauge": _infergauge,
}


def detect_format(text: str, name: str) -> str:
    """The format of a trace from its first non-blank line (one-line error when none fits)."""
    first = next((line for line in text.splitlines() if line.strip()), "")
    if first.lstrip("\ufeff").startswith("TIMESTAMP") or "ContextTokens" in first:
        return "azure"
    try:
        raw = json.loads(first)
    except json.JSONDecodeError:
        raise ConfigError(f"{name}:1: not a trace (neither JSON lines nor an Azure CSV header)") from None
    if isinstance(raw, dict) and (raw.get("format") == INFERGAUGE_HEADER or "t" in raw):
        return "infergauge"
    if isinstance(raw, dict) and "hash_ids" in raw:
        return "alibaba" if "chat_id" in raw or "turn" in raw else "mooncake"
    raise ConfigError(
        f"{name}:1: cannot tell the trace format; pass --trace-format mooncake|alibaba|azure|infergauge"
    )


def _jsonl(text: str, name: str, fmt: str, scale: float) -> ParsedTrace:
    rows: list[TraceRow] = []
    parents: dict[str, str] = {}
    block_size = None
    parse = ROW_PARSERS[fmt]
    for number, line in enumerate(text.splitlines(), 1):
        where = f"{name}:{number}"
        if not line.strip():
            continue
        raw = json_line(line, where)
        if not isinstance(raw, dict):
            raise ConfigError(f"{where}: expected a JSON object per line, got {type(raw).__name__}")
        if fmt == "infergauge" and raw.get("format") == INFERGAUGE_HEADER and not rows:
            block_size = _int(raw, "block_size", where) if "block_size" in raw else None
            continue
        rows.append(parse(raw, where, number, scale))
        if "parent_chat_id" in raw:
            parents[str(raw.get("chat_id"))] = str(raw["parent_chat_id"])
    return ParsedTrace(fmt, _sessions(rows, parents) if parents else rows, block_size)


def _sessions(rows: list[TraceRow], parents: dict[str, str]) -> list[TraceRow]:
    """Alibaba turns name their parent turn (`parent_chat_id`, -1 for a first turn): each row's
    session is the first turn of its chain."""
    roots: dict[str, str] = {}

    def root(chat: str) -> str:
        seen: list[str] = []
        while parents.get(chat, "-1") != "-1" and chat not in roots and len(seen) < len(parents):
            seen.append(chat)
            chat = parents[chat]
        found = roots.get(chat, chat)
        for c in seen:
            roots[c] = found
        return found

    return [replace(r, session=root(r.session)) if r.session is not None else r for r in rows]


def _azure_time(text: str, where: str) -> float:
    """Seconds since the epoch of `2023-11-16 18:15:46.6805900` (7 fraction digits cut to 6)."""
    head, dot, frac = text.strip().partition(".")
    try:
        stamp = datetime.fromisoformat(head + (dot + frac[:6] if dot else "")).replace(tzinfo=UTC)
    except ValueError:
        raise ConfigError(f"{where}: field 'TIMESTAMP' is not a date-time: {text[:40]!r}") from None
    return stamp.timestamp()


def _azure(text: str, name: str) -> ParsedTrace:
    reader = csv.DictReader(io.StringIO(text.lstrip("\ufeff")))
    missing = {"TIMESTAMP", "ContextTokens", "GeneratedTokens"} - set(reader.fieldnames or ())
    if missing:
        raise ConfigError(f"{name}:1: Azure trace header lacks {', '.join(sorted(missing))}")
    rows = []
    for raw in reader:
        where = f"{name}:{reader.line_num}"
        values: dict[str, Any] = {}
        for key in ("ContextTokens", "GeneratedTokens"):
            try:
                values[key] = int(raw[key] or "")
            except ValueError:
                raise ConfigError(
                    f"{where}: field {key!r} must be an integer >= 1, got {raw[key]!r}"
                ) from None
        row = TraceRow(
            reader.line_num,
            _azure_time(raw["TIMESTAMP"] or "", where),
            _int(values, "ContextTokens", where),
            _int(values, "GeneratedTokens", where),
        )
        rows.append(row)
    return ParsedTrace("azure", rows)


def parse_trace(text: str, name: str, fmt: str | None = None, time_unit: str | None = None) -> ParsedTrace:
    """The trace's rows, checked; times in seconds, not yet made relative. Raises ConfigError."""
    fmt = fmt or detect_format(text, name)
    unit = time_unit or TIME_UNITS[fmt]
    parsed = _azure(text, name) if fmt == "azure" else _jsonl(text, name, fmt, 1e-3 if unit == "ms" else 1.0)
    if not parsed.rows:
        raise ConfigError(f"trace {name!r} has no requests")
    for before, row in zip(parsed.rows, parsed.rows[1:], strict=False):
        if row.t_s < before.t_s:
            raise ConfigError(
                f"{name}:{row.line}: timestamp goes back in time ({row.t_s:g} s after {before.t_s:g} s on "
                f"line {before.line}); a trace must be sorted by time"
            )
    return parsed


def read_trace(path: str, fmt: str | None = None, time_unit: str | None = None) -> tuple[ParsedTrace, bytes]:
    """Read and parse a trace file; returns the parsed trace and the file's bytes (for its sha256)."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read trace {path!r}: {exc.strerror}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ConfigError(f"{path}:{line}: not UTF-8 (byte 0x{data[exc.start]:02x})") from None
    return parse_trace(text, path, fmt, time_unit), data
