"""The marked stream's parse in C (`loadgen.transport._sse.marked`) against the Python one: where C
answers, the parse is the Python parse's; where the Python parse declines or raises, C declines."""

from __future__ import annotations

import random

import pytest

from loadgen.transport import sse
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
