"""The chunked-framing reader of the stamping connection: body bytes and read times, any split."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from loadgen.transport.sse import ProtocolError, _parse_marked, parse_general, parse_stream
from loadgen.transport.stamping import ChunkedBody, Reads, _chunked_head
from tests.conftest import GOLDEN_SSE_STREAMS
from tests.loadgen_servers import golden_body


def _chunked(pieces: list[bytes], ext: bool = False) -> bytes:
    out = b"".join(b"%x%s\r\n%s\r\n" % (len(p), b";x=1" if ext else b"", p) for p in pieces)
    return out + b"0\r\n\r\n"


def _feed(body: ChunkedBody, wire: bytes, cuts: list[int]) -> tuple[bytes | None, int]:
    """Feed `wire` cut at `cuts` (read i stamped i); the rest for aiohttp and the read it came in."""
    bounds = [0, *cuts, len(wire)]
    for i, (a, b) in enumerate(zip(bounds, bounds[1:], strict=False)):
        rest = body.feed(i, wire[a:b])
        if rest is not None:
            return rest + wire[b:], i
    return None, -1


def test_one_chunk_per_read_is_recorded_with_its_read_time() -> None:
    events = [b'data: {"choices":[{"text":"%d"}]}\n\n' % i for i in range(5)]
    wire = _chunked(events)
    cuts, pos = [], 0
    for e in events:
        pos += len(b"%x\r\n" % len(e)) + len(e) + 2
        cuts.append(pos)
    pieces: list[tuple[int, bytes]] = []
    rest, at = _feed(ChunkedBody(pieces), wire, cuts)
    assert pieces == list(enumerate(events))
    assert (rest, at) == (b"0\r\n\r\n", 5)


@pytest.mark.parametrize("seed", range(30))
def test_any_split_of_the_wire_gives_the_body_and_each_byte_its_read(seed: int) -> None:
    rng = random.Random(seed)
    events = [rng.randbytes(rng.randint(1, 300)) for _ in range(rng.randint(1, 12))]
    wire = _chunked(events, ext=seed % 3 == 0)
    cuts = sorted(rng.sample(range(1, len(wire)), k=min(len(wire) - 1, rng.randint(1, 40))))
    pieces: list[tuple[int, bytes]] = []
    rest, at = _feed(ChunkedBody(pieces), wire, cuts)
    assert b"".join(p for _, p in pieces) == b"".join(events)
    assert rest == b"0\r\n\r\n"
    assert wire.endswith(rest)
    # each body byte is stamped with the read it arrived in
    data_at: list[int] = []  # wire offset of each body byte
    pos = 0
    for e in events:
        pos = wire.index(b"\r\n", pos) + 2
        data_at += range(pos, pos + len(e))
        pos += len(e) + 2
    bounds = [0, *cuts, len(wire)]
    expected: dict[int, bytes] = {}
    for i, (a, b) in enumerate(zip(bounds, bounds[1:], strict=False)):
        got = bytes(wire[k] for k in data_at if a <= k < b)
        if got:
            expected[i] = got
    recorded: dict[int, bytes] = {}
    for t, p in pieces:
        recorded[t] = recorded.get(t, b"") + p
    assert recorded == expected
    assert max(recorded) <= at


def test_unexpected_framing_is_handed_over_from_the_chunk_boundary() -> None:
    pieces: list[tuple[int, bytes]] = []
    body = ChunkedBody(pieces)
    assert body.feed(1, b"3\r\nabc\r\n") is None
    assert body.feed(2, b"zz\r\nmore") == b"zz\r\nmore"
    assert pieces == [(1, b"abc")]


def test_only_chunked_bodies_are_read_by_the_framing_reader() -> None:
    assert _chunked_head(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
    assert _chunked_head(b"HTTP/1.1 500 Oops\r\ntransfer-encoding:  Chunked\r\n\r\n")
    assert not _chunked_head(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n")
    assert not _chunked_head(b"HTTP/1.1 204 No Content\r\nTransfer-Encoding: chunked\r\n\r\n")
    assert not _chunked_head(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n")


_TOKEN_A = b'data: {"choices":[{"text":"a"}]}\n\n'


# ---- token marks: reads recognised on arrival as one token event, and the parse that uses them ----


def _marked_reads(events: list[bytes], group: list[int]) -> Reads:
    """Feed `events` through a ChunkedBody, `group[i]` chunks per read (one chunk per event)."""
    reads = Reads()
    body, pos = ChunkedBody(reads), 0
    for t, n in enumerate(group):
        wire = b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in events[pos : pos + n])
        pos += n
        assert body.feed(t, wire) is None
    return reads


def _golden_events(path: Path) -> list[bytes]:
    """The capture's SSE events, each with its blank line (the engines write one event per chunk)."""
    body, _ = golden_body(path)
    return [e + b"\n\n" for e in body.split(b"\n\n") if e.strip()]


@pytest.mark.parametrize("path", GOLDEN_SSE_STREAMS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_marked_reads_parse_as_decoding_every_event(path: Path) -> None:
    events = _golden_events(path)
    singles = _marked_reads(events, [1] * len(events))
    assert len(singles.marks) == len(singles)
    assert sum(singles.marks) >= len(events) - 3  # all but the usage chunk and [DONE] (and a role chunk)
    assert _parse_marked(singles, singles.marks) is not None  # the marked fast path is taken
    assert parse_stream(singles) == parse_general(list(singles))
    # the end of the stream coalesced into one read, and pairs of events in one read
    tail = _marked_reads(events, [1] * (len(events) - 3) + [3])
    assert parse_stream(tail) == parse_general(list(tail))
    pairs = _marked_reads(events, [2] * (len(events) // 2) + [1] * (len(events) % 2))
    assert not any(pairs.marks)
    assert parse_stream(pairs) == parse_general(list(pairs))


def test_only_whole_one_line_token_events_are_marked() -> None:
    events = [
        b'data: {"choices":[{"text":"a"}]}\n\n',  # a token event
        b'data: {"choices":[],"usage":{"completion_tokens":3}}\n\n',  # usage only
        b'data: {"choices":[{"text":"b"}]}\n\ndata: {"choices":[{"text":"c"}]}\n\n',  # two events
        b'data: {"choices": [{"text":"d"}]}\n\n',  # spaced JSON: not the compact pattern
        b"data: [DONE]\n\n",
    ]
    reads = _marked_reads(events, [1] * len(events))
    assert list(reads.marks) == [1, 0, 0, 0, 0]
    parsed = parse_stream(reads)
    assert parsed == parse_general(list(reads))
    assert parsed.token_ns == [0, 2, 2, 3]
    assert (parsed.completion_tokens, parsed.done) == (3, True)


@pytest.mark.parametrize(
    "events",
    [
        [_TOKEN_A, b"data: [DONE]\n\n", b'data: {"choices":[{"text":"b"}]}\n\n'],
        [b'data: {"choices":[{"text":"a"}]} x}\n\n', b"data: [DONE]\n\n"],  # bad JSON in a decoded token
        [b'data: {"choices":[{"text":"a"}]}\n\n', b'data: {"choices":[]} x\n\n', b"data: [DONE]\n\n"],
    ],
)
def test_marked_streams_that_are_malformed_are_rejected(events: list[bytes]) -> None:
    reads = _marked_reads(events, [1] * len(events))
    assert reads.marks[0] == 1
    with pytest.raises(ProtocolError):
        parse_stream(reads)
    with pytest.raises(ProtocolError):
        parse_general(list(reads))


def test_marks_out_of_step_with_the_reads_are_ignored() -> None:
    events = [b'data: {"choices":[{"text":"a"}]}\n\n', b'data: {"choices":[{"text":"b"}]}\n\n']
    reads = _marked_reads(events, [1, 1])
    reads.append((5, b"data: [DONE]\n\n"))  # appended by another framing: no mark
    assert parse_stream(reads) == parse_general(list(reads))


def test_a_marked_read_inside_an_event_split_across_reads_is_not_taken_for_a_token() -> None:
    # the body is one event whose data spans three chunks; the middle chunk alone looks like a token event
    events = [b'data: {"x":1}\n\ndata: {"y":', b'data: {"choices":[{"text":"a"}]}\n\n', b"2}\n\n"]
    reads = _marked_reads(events, [1, 1, 1])
    assert list(reads.marks) == [0, 1, 0]
    with pytest.raises(ProtocolError):
        parse_general(list(reads))
    with pytest.raises(ProtocolError):
        parse_stream(reads)
