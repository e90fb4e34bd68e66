"""The marked stream's parse in C (`loadgen.transport._sse.marked`) against the Python one: where C
answers, the parse is the Python parse's; where the Python parse declines or raises, C declines."""

from __future__ import annotations

import dataclasses
import random
from array import array

import pytest

from loadgen.records import RequestRecord
from loadgen.transport import finish, sse
from loadgen.transport.chunked import ChunkedBody, Reads
from tests.conftest import GOLDEN_SSE_STREAMS
from tests.loadgen_servers import golden_body

_sse = pytest.importorskip("loadgen.transport._sse", reason="the C parse is not built here")

TOKEN = b'data: {"id":"c","choices":[{"index":0,"text":" w%d","finish_reason":null}]}\n\n'
SPACED = b'data: {"choices" : [ {"text":"s%d"}]}\n\n'  # token-bearing, not the compact pattern
USAGE = b'data: {"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":%d}}\n\n'
PIECES = [
    b"data: [DONE]\n\n",
    b'data: {"error":{"message":"boom"}}\n\n',
    b"data: \n\n",
    b": comment\n\n",
    b'data: {"choices":[{"text":"cr"}]}\r\n\r\n',
    b'data: {"choices":[{"text":"x"}]}\n\n\n',
    b'data: {"choices":[{"text":"no end"}]}\n',
    b'data: {"choices":[{"text":"y"}]',
    b'data: "choices":[{"text":"z"}]\n\n',
    b"event: x\ndata: {}\n\n",
    b'data: {"choices": []}\n\n',
    b'data: {"choices":[{"text":"big"}],"usage":{"completion_tokens":123456789012345678901}}\n\n',
    b'data: {"choices":[{"text":"nan"}],"v":NaN}\n\n',
    b"data: {bad json}\n\n",
]


def _result(fn, reads, marks):  # type: ignore[no-untyped-def]
    try:
        return fn(reads, marks)
    except sse.ProtocolError as exc:
        return ("raises", str(exc))


def _native(reads, marks):  # type: ignore[no-untyped-def]
    got = _sse.marked(reads, marks)
    if got is None:
        return None
    parsed = sse.ParsedStream(token_ns=got[0], done=got[1])
    sse._absorb_decoded(parsed, got[2])
    return parsed


def _check(reads: Reads) -> bool:
    """C against Python on one stream (the same parse, or the same error from the JSON decode both
    share); True when C answered."""
    python = _result(sse._parse_marked_python, reads, reads.marks)
    answer = _sse.marked(reads, reads.marks)
    if answer is None:
        return False
    assert python is not None, list(reads)  # C answers only streams the Python parse takes
    assert _result(_native, reads, reads.marks) == python
    assert _result(sse._parse_marked, reads, reads.marks) == python
    return True


def _reads(events: list[bytes], marked: list[bool], times: list[int]) -> Reads:
    reads = Reads()
    for event, mark, t in zip(events, marked, times, strict=True):
        reads.append((t, event))
        reads.marks.append(mark)
    return reads


def _random_stream(rng: random.Random) -> Reads:
    n = rng.randint(1, 12)
    events: list[bytes] = [TOKEN % i for i in range(n)]
    for _ in range(rng.randint(0, 3)):
        events.insert(rng.randint(0, len(events)), rng.choice([SPACED % rng.randint(0, 9), *PIECES]))
    if rng.random() < 0.8:
        events += [USAGE % n, b"data: [DONE]\n\n"]
    # reads: one event each, or several joined; a read is marked only if it is one compact event
    reads_data: list[bytes] = []
    i = 0
    while i < len(events):
        k = 1 if rng.random() < 0.7 else rng.randint(2, 3)
        reads_data.append(b"".join(events[i : i + k]))
        i += k
    marked = [
        d.startswith(b"data: {")
        and d.endswith(b"}\n\n")
        and d.find(sse.COMPACT_TOKEN) > 0
        and d.count(b"\n") == 2
        for d in reads_data
    ]
    if rng.random() < 0.1:  # a mark the reader would not set
        j = rng.randrange(len(marked))
        marked[j] = not marked[j]
    times = (
        sorted(rng.randrange(10**9) for _ in reads_data)
        if rng.random() < 0.7
        else [rng.randrange(50) for _ in reads_data]
    )
    return _reads(reads_data, marked, times)


def test_random_streams_parse_as_in_python() -> None:
    rng = random.Random(7)
    answered = sum(_check(_random_stream(rng)) for _ in range(20_000))
    assert answered > 5_000  # most usual streams are C's


@pytest.mark.parametrize("path", GOLDEN_SSE_STREAMS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_golden_streams_read_by_the_chunked_reader_parse_as_in_python(path) -> None:  # type: ignore[no-untyped-def]
    body, _ = golden_body(path)
    events = [e + b"\n\n" for e in body.split(b"\n\n") if e.strip()]
    for group in (
        [1] * len(events),
        [1] * (len(events) - 3) + [3],
        [2] * (len(events) // 2) + [1] * (len(events) % 2),
    ):
        reads, pos = Reads(), 0
        chunked = ChunkedBody(reads)
        for t, n in enumerate(group):
            wire = b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in events[pos : pos + n])
            pos += n
            assert chunked.feed(t, wire) is None
        if any(reads.marks):
            _check(reads)


def test_the_usual_stream_is_parsed_in_c() -> None:
    reads = _reads(
        [TOKEN % i for i in range(31)] + [TOKEN % 31 + USAGE % 32 + b"data: [DONE]\n\n"],
        [True] * 31 + [False],
        list(range(32)),
    )
    assert _check(reads)
    parsed = sse.parse_stream(reads)
    assert parsed.token_ns == list(range(32))
    assert parsed.done
    assert parsed.completion_tokens == 32


def test_reads_it_does_not_take_are_declined() -> None:
    marks = bytearray([1])
    assert _sse.marked([], bytearray()) is None
    assert _sse.marked([(1, TOKEN)], bytearray([0])) is None  # no marked read
    assert _sse.marked([[1, TOKEN]], marks) is None  # not a tuple
    assert _sse.marked([(1.0, TOKEN)], marks) is None  # not an int stamp
    assert _sse.marked([(1, bytearray(TOKEN))], marks) is None  # not bytes
    assert _sse.marked([(1, TOKEN)], bytearray([2])) is None  # a mark that is neither
    assert _sse.marked([(1, TOKEN), (2, TOKEN)], marks) is None  # marks and reads disagree
    with pytest.raises(TypeError):
        _sse.marked((1, TOKEN), marks)


# finish(record): finish.finalize of the usual record in C, against finalize in Python

USAGE_MORE = (
    b'data: {"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":%d,'
    b'"prompt_tokens_details":{"cached_tokens":4}}}\n\n'
)
ODD_USAGE = [
    b'data: {"choices":[],"usage":{"prompt_tokens":"9","completion_tokens":3}}\n\n',  # int("9")
    b'data: {"choices":[],"usage":{"completion_tokens":3.0}}\n\n',
    b'data: {"choices":[],"usage":{"prompt_tokens_details":{"cached_tokens":true}}}\n\n',
    b'data: {"choices":[],"usage":{"prompt_tokens_details":[1]}}\n\n',
    b'data: {"choices":[],"usage":[1]}\n\n',
    b'data: {"choices":"abc"}\n\n',
    b'data: {"choices":[1]}\n\n',
    b'data: {"choices":[],"error":"overloaded"}\n\n',
    b'data: {"choices":[],"usage":{"completion_tokens":12345678901234567890123}}\n\n',
]


def _record(reads: Reads, status: int | None = 200, **fields: object) -> RequestRecord:
    r = RequestRecord(3, "x", False, 0, 1, 1, sent_ns=1, done_ns=10**10, http_status=status, raw=reads)
    for name, value in fields.items():
        setattr(r, name, value)
    return r


def _copy(reads: Reads) -> Reads:
    out = Reads()
    out.extend(reads)
    out.marks += reads.marks
    return out


def _same_finish(reads: Reads, **fields: object) -> bool:
    """finish in C against finalize in Python on one record; True when C took it. Where C declines,
    the record is as it was."""
    native, python = _record(_copy(reads), **fields), _record(_copy(reads), **fields)
    before = {f.name: getattr(native, f.name) for f in dataclasses.fields(RequestRecord)}
    took = _sse.finish(native)
    if not took:
        assert {f.name: getattr(native, f.name) for f in dataclasses.fields(RequestRecord)} == before
        return False
    try:
        finish._native_finish, saved = None, finish._native_finish
        finish.finalize(python)
    finally:
        finish._native_finish = saved
    for f in dataclasses.fields(RequestRecord):
        a, b = getattr(native, f.name), getattr(python, f.name)
        assert (a, type(a)) == (b, type(b)), (f.name, list(reads))
    return True


def test_random_records_finish_as_in_python() -> None:
    rng = random.Random(11)
    took = 0
    for _ in range(10_000):
        reads = _random_stream(rng)
        if rng.random() < 0.3:  # the usage event of another shape, or one this parse leaves to Python
            tail = USAGE_MORE % rng.randint(0, 9) if rng.random() < 0.5 else rng.choice(ODD_USAGE)
            reads.append((10**9 + 1, tail))
            reads.marks.append(0)
        took += _same_finish(reads)
    assert took > 2_000


@pytest.mark.parametrize("path", GOLDEN_SSE_STREAMS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_golden_records_finish_as_in_python(path) -> None:  # type: ignore[no-untyped-def]
    body, _ = golden_body(path)
    events = [e + b"\n\n" for e in body.split(b"\n\n") if e.strip()]
    reads, chunked = Reads(), None
    chunked = ChunkedBody(reads)
    for t, event in enumerate(events):
        assert chunked.feed(t, b"%x\r\n%s\r\n" % (len(event), event)) is None
    _same_finish(reads)


def test_the_usual_record_is_finished_in_c() -> None:
    reads = _reads(
        [TOKEN % i for i in range(31)] + [TOKEN % 31 + USAGE_MORE % 32 + b"data: [DONE]\n\n"],
        [True] * 31 + [False],
        list(range(100, 132)),
    )
    assert _same_finish(reads)
    r = _record(reads)
    assert _sse.finish(r)
    assert (r.outcome, r.error, r.raw) == ("ok", None, None)
    assert (r.first_ns, r.last_ns, list(r.token_ns), type(r.token_ns)) == (
        100,
        131,
        list(range(100, 132)),
        array,
    )
    assert (r.prompt_tokens, r.cached_tokens, r.output_tokens, r.token_count) == (9, 4, 32, "usage")
    cut = _reads([TOKEN % 0, TOKEN % 1], [True, True], [5, 6])  # no [DONE]: as finalize words it
    assert _same_finish(cut)
    r = _record(cut)
    assert _sse.finish(r)
    assert (r.outcome, r.error, r.output_tokens, r.token_count) == (
        "protocol_error",
        "stream ended before data: [DONE]",
        2,
        "estimated",
    )


def test_records_finish_leaves_to_python() -> None:
    reads = _reads([TOKEN % 0, b"data: [DONE]\n\n"], [True, False], [1, 2])
    assert _same_finish(reads)
    for fields in (
        {"status": 500},  # an error status: its body is not a stream
        {"status": None},
        {"outcome": "timeout"},
        {"fallback": ("disconnect", "cut")},  # a stream cut short
    ):
        assert not _same_finish(reads, **fields)
    plain = _record(list(reads))  # reads without marks
    assert not _sse.finish(plain)
    assert plain.raw == list(reads)
    with pytest.raises(AttributeError):
        _sse.finish(object())


def test_held_is_the_python_sum() -> None:
    rng = random.Random(3)
    for _ in range(200):
        reads = [(rng.randrange(10**9), bytes(rng.randrange(300))) for _ in range(rng.randrange(1, 50))]
        assert _sse.held(reads, 200) == sum(len(d) for _, d in reads) + 200 * len(reads)
    assert _sse.held([(1, "text")], 200) is None  # not bytes: the Python sum
    assert _sse.held([[1, b"x"]], 200) is None
    assert _sse.held([], 200) == 0


# elided reads (chunked.Reads.elided): the C reader keeps only the stamps of the marked reads between
# the first and the last; the parse must read what it reads from the whole reads


def _elide(reads: Reads) -> Reads:
    """`reads` as the C reader records them with `elided`: as each marked read arrives, the one
    before it goes if it is marked and not the first marked read."""
    out = Reads()
    out.elided = bytearray()
    first = -1
    for (t, data), mark in zip(reads, reads.marks, strict=True):
        p = len(out) - 1
        if mark and p >= 0 and p != first and out.marks[p] == 1 and out[p] is not None:
            out.elided += array("q", [out[p][0]]).tobytes()
            out[p] = None  # type: ignore[call-overload]
        out.append((t, data))
        out.marks.append(mark)
        if mark and first < 0:
            first = len(out) - 1
    return out


def _one_token_event(data: bytes) -> bool:
    """What the reader marks (ChunkedBody.feed, _kread's token_mark): one compact token event."""
    return (
        data.startswith(b"data: {")
        and data.endswith(b"}\n\n")
        and data.find(sse.COMPACT_TOKEN) > 0
        and data.count(b"\n") == 2
    )


def _fields(r: RequestRecord) -> dict[str, object]:
    return {f.name: (getattr(r, f.name), type(getattr(r, f.name))) for f in dataclasses.fields(RequestRecord)}


def _python_finalize(reads: list[tuple[int, bytes]]) -> RequestRecord:
    r = _record(reads)  # type: ignore[arg-type]
    try:
        finish._native_finish, saved = None, finish._native_finish
        finish.finalize(r)
    finally:
        finish._native_finish = saved
    return r


def test_elided_records_finish_as_whole_ones() -> None:
    rng = random.Random(13)
    took = elided_any = 0
    for _ in range(10_000):
        reads = _random_stream(rng)
        if any(
            mark and not _one_token_event(data) for (_, data), mark in zip(reads, reads.marks, strict=True)
        ):
            continue  # a mark the reader would not set: it elides only reads that are one token event
        short = _elide(reads)
        if any(b'"usage"' in data for (_, data), kept in zip(reads, short, strict=True) if kept is None):
            continue  # a usage inside a token event between the first and last: no fast path reads it
        elided_any += None in short
        whole = _python_finalize(_copy(reads))
        if whole.outcome == "protocol_error" and "invalid JSON" in (whole.error or ""):
            continue  # a broken token event between the first and last: elided, it reads as one
        native = _record(short)
        if _sse.finish(native):
            took += 1
            assert _fields(native) == _fields(whole), list(reads)
        else:
            assert native.raw is short  # declined: untouched
        assert _fields(_python_finalize(short)) == _fields(whole), list(reads)  # sse.restored
    assert took > 2_000
    assert elided_any > 2_000


def test_restored_and_held_read_elided_reads() -> None:
    reads = _reads(
        [TOKEN % i for i in range(4)] + [b"data: [DONE]\n\n"], [True] * 4 + [False], [10, 11, 12, 13, 14]
    )
    short = _elide(reads)
    assert [r is None for r in short] == [False, True, True, False, False]
    assert sse.restored(short) == [reads[0], (11, sse.STAND_IN), (12, sse.STAND_IN), reads[3], reads[4]]
    assert sse.restored(reads) is reads
    assert _sse.held(short, 200) == _sse.held(reads, 200) - 2 * (len(TOKEN % 1) + 200) + 2 * 8
    finish._native_finish, saved = None, finish._native_finish
    try:
        from loadgen.run import backlog

        backlog_sse, backlog._sse = backlog._sse, None
        try:
            assert backlog.held_bytes(short) == _sse.held(short, backlog.PIECE_OVERHEAD)
        finally:
            backlog._sse = backlog_sse
    finally:
        finish._native_finish = saved
    bad = _copy(short)
    bad.elided = bytearray(8)  # fewer stamps than elided reads: C declines, Python raises nothing odd
    assert not _sse.finish(_record(bad))
