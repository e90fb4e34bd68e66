"""Parse a recorded SSE stream after the fact: reads were stamped as bytes arrived (client.py).

An event's time is the arrival time of the read that completed it (its terminating blank line).
A chunk is *token-bearing* when its `choices` list is not empty, as `vllm bench serve` counts them:
engines stream one chunk per decode step, and a step's text can be empty (a detokenizer holding back
partial UTF-8, a special token, SGLang's role-only first chat chunk), yet the step happened. The
usage-only chunk (`choices: []`) and `[DONE]` are not token-bearing.

Fast path (the usual stream: one-line `data: {...}` events, LF framing): token-bearing chunks are
recognised by their bytes (a non-empty top-level `"choices": [` list; a quote inside a JSON string is
escaped, so the pattern cannot match string content) and checked for object framing; only the first
and last of them and every other event (usage, error) are JSON-decoded. Any other framing (CR line
ends, comments, multi-line or partial events) takes the general path, which decodes every event.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_left
from dataclasses import dataclass, field
from functools import partial
from itertools import accumulate, compress, repeat
from operator import contains, itemgetter
from typing import Any

_TOKEN_BEARING = re.compile(rb'"choices"\s*:\s*\[\s*[^\]\s]')  # a non-empty `choices` list
_COMPACT_TOKEN = b'"choices":[{'
_DONE = b"data: [DONE]"
_FIELD = itemgetter(slice(0, 6))


class ProtocolError(ValueError):
    """The stream is not the OpenAI SSE format we expect (bad JSON, missing data, no [DONE])."""


@dataclass
class ParsedStream:
    """What one response stream carried, with the arrival time of each token-bearing chunk."""

    token_ns: list[int] = field(default_factory=list)
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    done: bool = False
    error: str | None = None
    finish_reason: str | None = None


def split_events(reads: list[tuple[int, bytes]]) -> list[tuple[int, bytes]]:
    """Cut stamped reads into (time, event bytes) at blank lines; a trailing partial event is kept."""
    events: list[tuple[int, bytes]] = []
    buf = b""
    t = 0
    for t, data in reads:
        buf += data
        if b"\r" in buf:
            buf = buf.replace(b"\r\n", b"\n")
        while True:
            cut = buf.find(b"\n\n")
            if cut < 0:
                break
            if cut:
                events.append((t, buf[:cut]))
            buf = buf[cut + 2 :]
    if buf.strip():
        events.append((t, buf))
    return events


def event_data(event: bytes) -> bytes | None:
    """The joined `data:` field of one SSE event (None for comments / events without data)."""
    parts = []
    for line in event.split(b"\n"):
        if line.startswith(b"data:"):
            parts.append(line[5:].lstrip(b" "))
        elif line and not line.startswith((b":", b"event:", b"id:", b"retry:")):
            raise ProtocolError(f"not an SSE line: {line[:80]!r}")
    return b"\n".join(parts) if parts else None


def _absorb(parsed: ParsedStream, t: int, obj: Any, count_token: bool = True) -> None:
    if type(obj) is not dict:
        raise ProtocolError(f"SSE data is not a JSON object: {str(obj)[:80]}")
    choices = obj.get("choices")
    if choices:
        if count_token:
            parsed.token_ns.append(t)
        for c in choices:
            if c.get("finish_reason"):
                parsed.finish_reason = c["finish_reason"]
    elif "error" in obj:
        err = obj["error"]
        parsed.error = str(err.get("message", err) if isinstance(err, dict) else err)[:300]
        return
    usage = obj.get("usage")
    if usage:
        if usage.get("completion_tokens") is not None:
            parsed.completion_tokens = int(usage["completion_tokens"])
        if usage.get("prompt_tokens") is not None:
            parsed.prompt_tokens = int(usage["prompt_tokens"])


def _data_items(reads: list[tuple[int, bytes]], parsed: ParsedStream) -> tuple[list[int], list[bytes]]:
    """(times, JSON payloads) of the data events; marks [DONE]; raises on anything after it."""
    times: list[int] = []
    payloads: list[bytes] = []
    for t, event in split_events(reads):
        if event[:6] == b"data: " and b"\n" not in event:  # the usual one-line event
            data = event[6:]
        else:
            found = event_data(event)
            if found is None:
                continue
            data = found
        if data == b"[DONE]":
            parsed.done = True
            continue
        if parsed.done:
            raise ProtocolError("data after [DONE]")
        times.append(t)
        payloads.append(data)
    return times, payloads


def _decode_all(payloads: list[bytes]) -> list[Any]:
    """All payloads in one `json.loads` (one C call); on failure, find and name the bad one."""
    try:
        return list(json.loads(b"[" + b",".join(payloads) + b"]"))
    except ValueError:
        for data in payloads:
            try:
                json.loads(data)
            except ValueError:
                raise ProtocolError(f"invalid JSON in SSE data: {data[:80]!r}") from None
        raise ProtocolError("SSE data events do not form JSON values") from None


def _plus_terminator(n: int) -> int:
    return n + 2


def fast_events(reads: list[tuple[int, bytes]]) -> tuple[list[int], list[bytes]] | None:
    """(completion times, events) when every event is one `data: ` line ended by a blank line (LF
    framing, nothing after the last event); None otherwise (use `split_events`)."""
    datas = [data for _, data in reads]
    buf = b"".join(datas)
    if not buf.startswith(b"data: ") or not buf.endswith(b"\n\n") or b"\r" in buf:
        return None
    events = buf.split(b"\n\n")
    events.pop()  # the empty rest after the last blank line
    n = len(events)
    if buf.count(b"\n") != 2 * n or set(map(_FIELD, events)) != {b"data: "}:
        return None  # multi-line events, empty events or other SSE fields
    read_ends = list(accumulate(map(len, datas)))
    event_ends = accumulate(map(_plus_terminator, map(len, events)))
    read_times = [t for t, _ in reads]
    return list(map(read_times.__getitem__, map(partial(bisect_left, read_ends), event_ends))), events


def _parse_fast(parsed: ParsedStream, times: list[int], events: list[bytes]) -> None:
    """Parse one-line data events (see module docstring: token chunks are recognised by bytes)."""
    if _DONE in events:
        end = events.index(_DONE)
        if end != len(events) - 1:
            raise ProtocolError("data after [DONE]")
        parsed.done = True
        del events[end], times[end]
    marks = list(map(contains, events, repeat(_COMPACT_TOKEN)))  # the engines' compact JSON
    for i, found in enumerate(marks):
        if not found:
            marks[i] = _TOKEN_BEARING.search(events[i]) is not None
    tokens = list(compress(range(len(marks)), marks))
    for i in tokens:
        event = events[i]
        if event[6:7] != b"{" or event[-1:] != b"}":
            raise ProtocolError(f"invalid JSON in SSE data: {event[6:86]!r}")
    decode = sorted({i for i, m in enumerate(marks) if not m} | set(tokens[:1] + tokens[-1:]))
    payloads = [events[i][6:] for i in decode]
    for i, obj in zip(decode, _decode_all(payloads) if payloads else [], strict=True):
        if type(obj) is dict and bool(obj.get("choices")) != marks[i]:
            raise ProtocolError(f"unexpected `choices` in SSE data: {events[i][6:86]!r}")
        _absorb(parsed, times[i], obj, count_token=False)
    parsed.token_ns = list(compress(times, marks))


def parse_stream(reads: list[tuple[int, bytes]]) -> ParsedStream:
    """Parse stamped reads of an OpenAI-style completions/chat stream; raises ProtocolError."""
    fast = fast_events(reads)
    if fast is None:
        return parse_general(reads)
    parsed = ParsedStream()
    _parse_fast(parsed, *fast)
    return parsed


def parse_general(reads: list[tuple[int, bytes]]) -> ParsedStream:
    """`parse_stream` for any SSE framing: every data event is JSON-decoded."""
    parsed = ParsedStream()
    times, payloads = _data_items(reads, parsed)
    for t, obj in zip(times, _decode_all(payloads) if payloads else [], strict=True):
        _absorb(parsed, t, obj)
    return parsed
