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
import os
import re
from array import array
from bisect import bisect_left
from dataclasses import dataclass, field
from functools import partial
from itertools import accumulate, chain, compress, repeat
from operator import itemgetter, not_
from typing import Any

import orjson

try:  # the marked stream's parse in C (loadgen/transport/_sse.c); LOADGEN_NATIVE=0 parses in Python
    from loadgen.transport import _sse  # type: ignore[attr-defined]
except ImportError:  # not built: parsed in Python, with the same result
    _sse = None
if os.environ.get("LOADGEN_NATIVE", "1") == "0":
    _sse = None

_TOKEN_BEARING = re.compile(rb'"choices"\s*:\s*\[\s*[^\]\s]')  # a non-empty `choices` list
COMPACT_TOKEN = b'"choices":[{'  # in a token event, as the engines write it
_DONE = b"data: [DONE]"
_FIELD = itemgetter(slice(0, 6))
_FIRST, _SECOND, _ORDER = itemgetter(0), itemgetter(1), itemgetter(0, 1)
_FOUND = (-1).__lt__  # a `find` result other than -1
_JSON = json.JSONDecoder().decode  # json.loads less its per-call encoding detection (in Python)
# digits as 0, the rest as space: a run of 19 digits may be an integer orjson does not read as json does
_DIGITS_ONLY = bytes(48 if 48 <= c <= 57 else 32 for c in range(256))
_LONG_DIGITS = b"0" * 19
_INVERT = bytes.maketrans(b"\x00\x01", b"\x01\x00")  # marks -> the reads not marked


# what an elided read (chunked.Reads.elided) reads as where every read's bytes are parsed: a compact
# token event, as its mark says
STAND_IN = b'data: {"choices":[{"index":0}]}\n\n'


def restored(reads: list[tuple[int, bytes]]) -> list[tuple[int, bytes]]:
    """`reads` with every elided read back as `(its stamp, STAND_IN)`, in a plain list (the marks stay
    the reads'); `reads` itself when none was elided."""
    elided = getattr(reads, "elided", None)
    if not elided:
        return reads
    stamps = iter(array("q", bytes(elided)))
    return [(next(stamps), STAND_IN) if r is None else r for r in reads]


class ProtocolError(ValueError):
    """The stream is not the OpenAI SSE format we expect (bad JSON, missing data, no [DONE])."""


@dataclass
class ParsedStream:
    """What one response stream carried, with the arrival time of each token-bearing chunk."""

    token_ns: list[int] = field(default_factory=list)
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None  # usage.prompt_tokens_details.cached_tokens (None: not sent)
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
        if buf.find(b"\r") >= 0:
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
        details = usage.get("prompt_tokens_details")
        if type(details) is dict and details.get("cached_tokens") is not None:
            parsed.cached_tokens = int(details["cached_tokens"])


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
    """All payloads in one JSON decode (one C call; UTF-8, as SSE is); on failure, name the bad one.

    orjson decodes it (~2x faster than json for a stream's usual three events) unless it holds a run
    of 19 digits (orjson reads an integer over 64 bits as a float, json exactly) or orjson rejects it
    (NaN, Infinity, 1e400, a lone surrogate: json reads those); otherwise the values are json's
    (tested)."""
    joined = b"[" + b",".join(payloads) + b"]"
    if joined.translate(_DIGITS_ONLY).find(_LONG_DIGITS) < 0:
        try:
            return orjson.loads(joined)  # type: ignore[no-any-return]
        except orjson.JSONDecodeError:
            pass
    try:
        return list(_JSON(joined.decode()))
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
    datas = list(map(_SECOND, reads))
    buf = b"".join(datas)
    if buf[:6] != b"data: " or buf.find(b"\r") >= 0:
        return None
    events = buf.split(b"\n\n")
    if events.pop():  # bytes after the last blank line
        return None
    n = len(events)
    if buf.count(b"\n") != 2 * n or set(map(_FIELD, events)) != {b"data: "}:
        return None  # multi-line events, empty events or other SSE fields
    times = list(map(_FIRST, reads))
    if all(map(bytes.endswith, datas, repeat(b"\n\n"))):  # the usual: reads end at event ends
        if n == len(datas):
            return times, events
        return list(chain.from_iterable(map(repeat, times, map(bytes.count, datas, repeat(b"\n\n"))))), events
    read_ends = list(accumulate(map(len, datas)))
    event_ends = accumulate(map(_plus_terminator, map(len, events)))
    return list(map(times.__getitem__, map(partial(bisect_left, read_ends), event_ends))), events


def _token_marks(events: list[bytes]) -> list[bool]:
    """Which one-line `data: ` events are token-bearing (by bytes); raises on a token event that is not
    framed as a JSON object."""
    n = len(events)
    # the engines' compact JSON; `find`, not `in`: bytes' `in` first tries the operand as an integer and
    # formats (then drops) a TypeError each time
    marks = list(map(_FOUND, map(bytes.find, events, repeat(COMPACT_TOKEN))))
    for i in compress(range(n), map(not_, marks)):
        marks[i] = _TOKEN_BEARING.search(events[i]) is not None
    framed = list(compress(events, marks))
    if not all(map(bytes.startswith, framed, repeat(b"data: {"))) or not all(
        map(bytes.endswith, framed, repeat(b"}"))
    ):
        bad = next(e for e in framed if e[6:7] != b"{" or e[-1:] != b"}")
        raise ProtocolError(f"invalid JSON in SSE data: {bad[6:86]!r}")
    return marks


def _strip_done(parsed: ParsedStream, times: list[int], events: list[bytes], last: bool = True) -> int:
    """Drop a final `data: [DONE]` (marking the stream done); raises when data follows it. `last`:
    whether these events end the stream. Returns how many events remain."""
    done = events.count(_DONE)
    if done:
        if done > 1 or events[-1] != _DONE or not last:
            raise ProtocolError("data after [DONE]")
        parsed.done = True
        del events[-1], times[-1]
    return len(events)


def _absorb_decoded(parsed: ParsedStream, items: list[tuple[int, bytes, bool]]) -> None:
    """Decode (time, event, token-bearing by bytes) in one `json.loads` and absorb them in order."""
    for (t, event, token), obj in zip(items, _decode_all([e[6:] for _, e, _ in items]), strict=True):
        if type(obj) is dict and bool(obj.get("choices")) != token:
            raise ProtocolError(f"unexpected `choices` in SSE data: {event[6:86]!r}")
        _absorb(parsed, t, obj, count_token=False)


def _parse_fast(parsed: ParsedStream, times: list[int], events: list[bytes]) -> None:
    """Parse one-line data events (see module docstring: token chunks are recognised by bytes)."""
    n = _strip_done(parsed, times, events)
    marks = _token_marks(events)
    tokens = list(compress(range(n), marks))
    decode = set(compress(range(n), map(not_, marks)))
    if tokens:
        decode |= {tokens[0], tokens[-1]}
    if decode:
        _absorb_decoded(parsed, [(times[i], events[i], marks[i]) for i in sorted(decode)])
    parsed.token_ns = list(compress(times, marks))


def _parse_marked(reads: list[tuple[int, bytes]], marks: bytearray) -> ParsedStream | None:
    """The fast path when the reader marked, as they arrived, the reads that are exactly one compact
    token event (`stamping.ChunkedBody`): only the other reads are looked at, and of the marked ones
    the first and last are decoded. None when some other read is not plain one-line data events.

    The C module does the part before the JSON decode where it is built (`_sse.marked`: the same
    token times, [DONE] and events to decode, ~20 µs less a 32-token stream); where it declines (any
    stream it does not take, or that this parse rejects) this one runs and answers or raises."""
    if _sse is not None:
        got = _sse.marked(reads, marks)
        if got is not None:
            token_ns, done, items = got
            parsed = ParsedStream(token_ns=token_ns, done=done)
            _absorb_decoded(parsed, items)
            return parsed
    return _parse_marked_python(reads, marks)


def _parse_marked_python(reads: list[tuple[int, bytes]], marks: bytearray) -> ParsedStream | None:
    """`_parse_marked` in Python."""
    first_i = marks.find(1)
    if first_i < 0:
        return None
    parsed = ParsedStream()
    times: list[int] = []
    events: list[bytes] = []
    if marks.find(0) >= 0:
        others = list(compress(reads, marks.translate(_INVERT)))
        if not all(map(bytes.endswith, map(_SECOND, others), repeat(b"\n\n"))):
            return None  # an event may span reads: a marked read must not sit inside one
        found = fast_events(others)
        if found is None:
            return None
        times, events = found
    k = _strip_done(parsed, times, events, last=marks[-1] == 0)
    other_marks = _token_marks(events)
    # (time, order within a read, event, token-bearing): the other reads' non-token events, and the
    # first and last token event of the stream (marked reads hold one event each)
    first, last = reads[first_i], reads[marks.rfind(1)]
    ends = [(first[0], 0, first[1][:-2], True), (last[0], 0, last[1][:-2], True)]
    marked_times = list(compress(map(_FIRST, reads), marks))
    if any(other_marks):  # token events among the other reads: the first or last token may be one
        tokens = list(compress(range(k), other_marks))
        ends += [(times[i], i, events[i], True) for i in (tokens[0], tokens[-1])]
        ends.sort()
        parsed.token_ns = sorted(marked_times + list(compress(times, other_marks)))
    else:
        parsed.token_ns = marked_times
    items = [(times[i], i, events[i], False) for i in compress(range(k), map(not_, other_marks))]
    items += [ends[0]] if ends[0] == ends[-1] else [ends[0], ends[-1]]
    items.sort(key=_ORDER)
    _absorb_decoded(parsed, [(t, e, token) for t, _, e, token in items])
    return parsed


def parse_stream(reads: list[tuple[int, bytes]]) -> ParsedStream:
    """Parse stamped reads of an OpenAI-style completions/chat stream; raises ProtocolError.

    `reads` may carry `marks` (chunked.Reads): reads recognised on arrival as one token event, and
    elided ones (chunked.Reads.elided: each read here as `chunked.STAND_IN`)."""
    marks = getattr(reads, "marks", None)
    reads = restored(reads)
    if marks and len(marks) == len(reads):
        parsed = _parse_marked(reads, marks)
        if parsed is not None:
            return parsed
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
