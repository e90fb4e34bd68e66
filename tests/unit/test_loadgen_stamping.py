"""The chunked-framing reader of the stamping connection: body bytes and read times, any split."""

from __future__ import annotations

import random

import pytest

from loadgen.stamping import ChunkedBody, _chunked_head


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
