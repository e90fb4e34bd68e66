"""The C reader of the raw client (`loadgen.transport._kread`, see kernel_stamps' docstring): on a
loopback TCP pair it records exactly the whole-chunk reads `ChunkedBody.feed`'s fast path takes, with
the same marks, and hands every other read, end of file, a read error and a closing transport to the
Python handlers; whole requests read with it and with the Python reader (`LOADGEN_NATIVE=0`) give the
same body pieces, marks, tokens, outcomes and errors, for framings that take every path."""

from __future__ import annotations

import asyncio
import select
import socket
import struct
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from loadgen.records import RequestRecord
from loadgen.transport import kernel_stamps
from loadgen.transport.chunked import ChunkedBody, Reads
from loadgen.transport.finish import finalize
from loadgen.transport.rawhttp import RawClient

_kread = pytest.importorskip("loadgen.transport._kread", reason="the C reader is not built here")
pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(kernel_stamps.SO_TIMESTAMPNS is None, reason="no SO_TIMESTAMPNS here"),
    pytest.mark.usefixtures("kernel_stamping_on"),
]

TOKEN = b'data: {"id":"c","choices":[{"index":0,"text":" t"}]}\n\n'


def chunk(data: bytes, size: bytes | None = None) -> bytes:
    return (size if size is not None else b"%x" % len(data)) + b"\r\n" + data + b"\r\n"


class Transport:
    def __init__(self) -> None:
        self.closing = False

    def is_closing(self) -> bool:
        return self.closing


@contextmanager
def tcp_pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    """(client end with kernel stamps on, server end), both on loopback."""
    lsock = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(lsock.getsockname())
    server, _ = lsock.accept()
    lsock.close()
    client.setblocking(False)
    client.setsockopt(socket.SOL_SOCKET, kernel_stamps.SO_TIMESTAMPNS, 1)
    server.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        yield client, server
    finally:
        client.close()
        server.close()


def _wait_readable(sock: socket.socket) -> None:
    assert select.select([sock], [], [], 5.0)[0], "nothing arrived"


def test_whole_chunks_are_recorded_in_c_and_the_rest_handed_on() -> None:
    calls: list[tuple[str, Any]] = []
    transport = Transport()
    with tcp_pair() as (client, server):
        reader = _kread.Reader(
            client.fileno(),
            transport,
            lambda t, data: calls.append(("received", (t, data))),
            lambda data: calls.append(("plain", data)),
            lambda exc: calls.append(("failed", exc)),
            lambda: calls.append(("eof", None)),
            lambda: calls.append(("closing", None)),
        )
        pieces, marks = Reads(), bytearray()
        reader.sink(pieces, marks)
        sends = [
            chunk(TOKEN),  # one whole token chunk: recorded, marked
            chunk(b'data: {"usage":{}}\n\n'),  # one whole chunk, not a token event: recorded, unmarked
            chunk(TOKEN, b"0_3a"),  # a size line only Python's int() reads: handed on
            chunk(TOKEN)[:10],  # part of a chunk: handed on
            chunk(TOKEN) + chunk(TOKEN)[:10],  # a whole chunk and part of the next: handed on
            chunk(TOKEN) + END,  # whole chunks and the last one: the data recorded (one piece, unmarked),
            # the last chunk handed on
            chunk(TOKEN) + chunk(b'data: {"usage":{}}\n\n'),  # two whole chunks: one piece, unmarked
            chunk(TOKEN) * 3,  # three: the same
        ]
        before = time.perf_counter_ns()
        for data in sends:
            server.sendall(data)
            _wait_readable(client)
            time.sleep(0.01)  # each send is its own read
            reader()
        after = time.perf_counter_ns()
        usage = b'data: {"usage":{}}\n\n'
        assert [data for _, data in pieces] == [TOKEN, usage, TOKEN + DONE, TOKEN + usage, TOKEN * 3]
        assert list(marks) == [1, 0, 0, 0, 0]
        assert [kind for kind, _ in calls] == ["received"] * 4
        assert [data for _, (_, data) in calls] == [*sends[2:5], b"0\r\n\r\n"]
        assert calls[3][1][0] == pieces[2][0]  # the last chunk has its read's stamp
        stamps = [t for t, _ in pieces] + [t for _, (t, _) in calls]
        assert all(before - 1_000_000 < t < after for t in stamps), (before, stamps, after)
        in_order = [pieces[0][0], pieces[1][0], *(t for _, (t, _) in calls), pieces[3][0], pieces[4][0]]
        assert in_order == sorted(in_order)  # each read stamped as it came

        reader.sink(None, None)  # no sink: a whole chunk is handed on too
        calls.clear()
        server.sendall(chunk(TOKEN))
        _wait_readable(client)
        reader()
        assert [(kind, data) for kind, (_, data) in calls] == [("received", chunk(TOKEN))]

        calls.clear()
        reader()  # nothing to read: nothing called
        assert calls == []
        transport.closing = True
        reader()
        assert calls == [("closing", None)]
        transport.closing = False
        calls.clear()
        server.shutdown(socket.SHUT_WR)
        _wait_readable(client)
        reader()
        assert calls == [("eof", None)]


def test_a_reset_is_handed_on_as_the_oserror() -> None:
    calls: list[tuple[str, Any]] = []
    with tcp_pair() as (client, server):
        reader = _kread.Reader(
            client.fileno(),
            Transport(),
            lambda t, data: calls.append(("received", data)),
            lambda data: calls.append(("plain", data)),
            lambda exc: calls.append(("failed", exc)),
            lambda: calls.append(("eof", None)),
            lambda: calls.append(("closing", None)),
        )
        server.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        server.close()  # linger 0: a reset
        _wait_readable(client)
        reader()
    assert [kind for kind, _ in calls] == ["failed"]
    assert isinstance(calls[0][1], ConnectionResetError)


def test_the_sink_takes_a_list_and_a_bytearray() -> None:
    with tcp_pair() as (client, _server):
        reader = _kread.Reader(client.fileno(), Transport(), print, print, print, print, print)
        with pytest.raises(TypeError, match="bytearray"):
            reader.sink([], b"")
        reader.release()
        reader()  # released: reads nothing, calls nothing


DONE = b"data: [DONE]\n\n"
END = chunk(DONE) + b"0\r\n\r\n"
SIZE = b"%x" % len(TOKEN)
# (name, outcome, tokens, what the server sends after the head, as separate writes; None: a reset)
BODIES = [
    ("whole token chunks", "ok", 5, [chunk(TOKEN)] * 5 + [END]),
    ("a chunk split over reads", "ok", 2, [chunk(TOKEN), chunk(TOKEN)[:9], chunk(TOKEN)[9:], END]),
    ("two chunks a read", "ok", 3, [chunk(TOKEN) + chunk(TOKEN), chunk(TOKEN), END]),
    (
        "three chunks a read, then one and a half",
        "ok",
        5,
        [chunk(TOKEN) * 3, chunk(TOKEN) + chunk(TOKEN)[:9], chunk(TOKEN)[9:], END],
    ),
    ("the end with the last token", "ok", 2, [chunk(TOKEN), chunk(TOKEN) + END]),
    ("an extension and upper-case sizes", "ok", 2, [chunk(TOKEN, SIZE.upper() + b";x=1"), chunk(TOKEN), END]),
    ("a size line split", "ok", 2, [chunk(TOKEN), SIZE[:1], SIZE[1:] + b"\r\n" + TOKEN + b"\r\n", END]),
    ("garbage for a size", "protocol_error", 1, [chunk(TOKEN), b"zz\r\n" + TOKEN + b"\r\n"]),
    ("a reset mid-body", "disconnect", 2, [chunk(TOKEN), chunk(TOKEN), None]),
]


async def _one(
    parts: list[bytes | None], keep_text: bool = True
) -> tuple[RequestRecord, list[bytes | None], bytes, bytes]:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        await reader.readexactly(14)
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        for part in parts:
            await writer.drain()
            await asyncio.sleep(0.01)  # each part its own read
            if part is None:
                sock = writer.get_extra_info("socket")
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                writer.transport.abort()
                return
            writer.write(part)
        await writer.drain()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        client = RawClient(f"http://127.0.0.1:{port}", None, 0, 5.0, keep_text=keep_text)
        record = RequestRecord(0, "n-0", False, 0, 4, 8)
        record = await client.send(record, "/v1/completions", b'{"prompt":[1]}')
        pieces = [None if read is None else read[1] for read in record.raw or ()]
        marks = bytes(getattr(record.raw, "marks", b""))
        elided = bytes(getattr(record.raw, "elided", None) or b"")
        record = finalize(record)
        client.close()
    finally:
        server.close()
    return record, pieces, marks, elided


@pytest.mark.parametrize(("name", "outcome", "tokens", "parts"), BODIES, ids=[b[0] for b in BODIES])
async def test_a_request_reads_the_same_in_c_and_in_python(
    name: str, outcome: str, tokens: int, parts: list[bytes | None], monkeypatch: pytest.MonkeyPatch
) -> None:
    native, native_pieces, native_marks, _ = await _one(parts)
    assert kernel_stamps.native_reads()
    elided, elided_pieces, elided_marks, stamps = await _one(parts, keep_text=False)
    monkeypatch.setenv("LOADGEN_NATIVE", "0")
    python, python_pieces, python_marks, _ = await _one(parts)
    assert not kernel_stamps.native_reads()
    assert kernel_stamps.arrival_stamps() == "kernel"
    for field in ("outcome", "error", "output_tokens", "http_status"):
        assert getattr(native, field) == getattr(python, field), field
    assert (native.outcome, native.output_tokens) == (outcome, tokens)
    assert native_pieces == python_pieces
    assert native_marks == python_marks
    # a run that reads no answer text: the marked reads between the first and the last kept as stamps
    for field in ("outcome", "error", "output_tokens", "http_status"):
        assert getattr(elided, field) == getattr(native, field), field
    assert len(elided.token_ns) == len(native.token_ns)
    assert elided_marks == native_marks
    first = native_marks.find(1)
    gone = [i for i, piece in enumerate(elided_pieces) if piece is None]
    assert all(native_marks[i] == 1 and first < i < len(native_marks) - 1 for i in gone)
    assert [elided_pieces[i] for i in range(len(native_pieces)) if i not in gone] == [
        native_pieces[i] for i in range(len(native_pieces)) if i not in gone
    ]
    assert len(stamps) == 8 * len(gone)
    if name == "whole token chunks":
        assert gone == [1, 2, 3]  # five token reads: the first and the last keep their bytes


def test_chunked_body_fast_path_agrees_with_the_c_reader_on_marks() -> None:
    """The marks the C reader writes are `ChunkedBody.feed`'s (the Python fast path), read by read."""
    samples = [
        TOKEN,
        b'data: {"usage":{}}\n\n',
        b"data: {" + b'"choices":[{' + b"}\n\n",
        b'data: {"choices":[{}\n\n\n',
    ]
    for sample in samples:
        reads = Reads()
        ChunkedBody(reads).feed(0, chunk(sample))
        with tcp_pair() as (client, server):
            reader = _kread.Reader(client.fileno(), Transport(), print, print, print, print, print)
            pieces, marks = Reads(), bytearray()
            reader.sink(pieces, marks)
            server.sendall(chunk(sample))
            _wait_readable(client)
            reader()
        assert [d for _, d in pieces] == [d for _, d in reads], sample
        assert marks == reads.marks, sample


def test_a_read_that_ends_the_body_is_said_with_its_stamp_and_stops_the_recording() -> None:
    """With an `ended` handler, a read of data chunks and exactly the last chunk is recorded up to the
    last chunk and `ended(t)` is called with its stamp instead of handing on `0\\r\\n\\r\\n`; the sink is
    cleared, so the next read is handed on. A read of the last chunk alone is handed on as before."""
    calls: list[tuple[str, Any]] = []
    with tcp_pair() as (client, server):
        reader = _kread.Reader(
            client.fileno(),
            Transport(),
            lambda t, data: calls.append(("received", data)),
            print,
            print,
            print,
            print,
            lambda t: calls.append(("ended", t)),
        )
        pieces = Reads()
        reader.sink(pieces, pieces.marks)
        server.sendall(chunk(TOKEN) + b"0\r\n\r\n")
        _wait_readable(client)
        reader()
        assert [d for _, d in pieces] == [TOKEN]
        assert calls == [("ended", pieces[0][0])]
        calls.clear()
        server.sendall(chunk(TOKEN))
        _wait_readable(client)
        reader()  # no sink any more: handed on
        assert calls == [("received", chunk(TOKEN))]
        assert len(pieces) == 1
        calls.clear()
        reader.sink(pieces, pieces.marks)
        server.sendall(b"0\r\n\r\n")
        _wait_readable(client)
        reader()
        assert calls == [("received", b"0\r\n\r\n")]


async def test_the_raw_client_ends_an_exchange_on_the_c_reader_s_word(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from loadgen.transport import rawhttp

    ended: list[int] = []
    real = rawhttp._Conn._ended

    def counted(self: Any, t: int) -> None:
        ended.append(t)
        real(self, t)

    monkeypatch.setattr(rawhttp._Conn, "_ended", counted)
    record, _, _, _ = await _one([chunk(TOKEN), chunk(TOKEN) + END])
    assert (record.outcome, record.output_tokens) == ("ok", 2)
    assert ended == [record.last_ns]  # the read that held the last token ended the body
