"""Arrival timestamps for streamed response bodies, taken where the bytes enter Python.

The load session's connector builds `StampingHandler` connection protocols. Each read is split at
the end of a response head before aiohttp parses it. For a chunked response (what SSE engines
send), the handler then reads the chunk framing itself: each read's body bytes are recorded as
`(perf_counter_ns(), bytes)` in one small Python step, and aiohttp's parser only gets the head and
the last (zero-size) chunk, which ends the message as usual (keep-alive, errors and connection
loss are aiohttp's). Anything the framing reader does not expect is handed, from a chunk boundary
on, to aiohttp's parser. Other bodies go through aiohttp's parser into a `StampingReader` (same
slots as StreamReader, so `__class__` assignment is allowed) that records each piece instead of
buffering it. Either way the reading task is woken once at end of body, and a busy event loop
delays no timestamp. Only the load session uses this connector: `resp.read()` returns nothing there.
"""

from __future__ import annotations

import contextlib
import functools
import time
from typing import Any

import aiohttp
from aiohttp.client_proto import ResponseHandler
from aiohttp.streams import StreamReader

from loadgen.transport.chunked import MAX_CHUNK_HEAD, ChunkedBody, Reads, chunk_size_prefix

__all__ = ["MAX_CHUNK_HEAD", "ChunkedBody", "Reads", "StampingConnector", "chunk_size_prefix", "read_stamped"]

_READS: dict[int, Reads] = {}  # id(reader) -> stamped body pieces


class StampingReader(StreamReader):
    """A body reader that records each piece with its arrival time instead of buffering it."""

    __slots__ = ()

    def feed_data(self, data: bytes, size: int = 0) -> bool:
        if data:
            _READS[id(self)].append((time.perf_counter_ns(), data))
            self.total_bytes += len(data)
        return False

    def begin_http_chunk_receiving(self) -> None:
        return None

    def end_http_chunk_receiving(self) -> None:
        return None  # no chunk bookkeeping and no wake-up per HTTP chunk


def _chunked_head(head: bytes) -> bool:
    """True for a response head with a body sent chunked (status not 1xx/204/304)."""
    lines = head.lower().split(b"\r\n")
    status = lines[0].split(b" ", 2)
    if len(status) < 2 or status[1][:1] == b"1" or status[1] in (b"204", b"304"):
        return False
    fields = {k.strip(): v.strip() for k, _, v in (line.partition(b":") for line in lines[1:])}
    return fields.get(b"transfer-encoding") == b"chunked" and b"content-length" not in fields


class StampingHandler(ResponseHandler):
    """Connection protocol that stamps and records the body of each response (module docstring)."""

    _chunked: ChunkedBody | None = None

    def data_received(self, data: bytes) -> None:
        arrived = time.perf_counter_ns()
        body = self._chunked
        if body is not None:
            rest = body.feed(arrived, data)
            if rest is None:
                return
            self._chunked = None
            self._parse_rest(rest)
            return
        cut = data.find(b"\r\n\r\n")
        if cut < 0:
            super().data_received(data)
            return
        before = getattr(self, "_payload", None)  # aiohttp internals: degrade to plain reads if they move
        head, data = data[: cut + 4], data[cut + 4 :]
        super().data_received(head)
        payload = getattr(self, "_payload", None)
        if payload is not None and payload is not before and type(payload) is StreamReader:
            self._stamp(payload, head, arrived)
            body = self._chunked
            if body is not None and data:
                data = body.feed(arrived, data) or b""
                if data:
                    self._chunked = None
                    self._parse_rest(data)
                    return
        if data:
            super().data_received(data)

    def _parse_rest(self, rest: bytes) -> None:
        """Hand the body's bytes from a chunk boundary on to aiohttp's parser; when it rejects them
        (random bytes for a chunk size), the body's reader gets the error too, not only the connection
        (else the reading task would wait for its timeout)."""
        payload = getattr(self, "_payload", None)
        super().data_received(rest)
        failed = self.exception()
        if failed is not None and isinstance(payload, StreamReader) and not payload.is_eof():
            cause = failed.__cause__ or failed
            payload.set_exception(aiohttp.ClientPayloadError(f"invalid chunked body: {cause}"))

    def _stamp(self, payload: StreamReader, head: bytes, arrived: int) -> None:
        key = id(payload)
        pieces = _READS[key] = Reads()
        try:
            payload.__class__ = StampingReader
        except TypeError:  # aiohttp changed the reader's layout: keep plain reads
            del _READS[key]
            return
        with contextlib.suppress(Exception):  # a failed body raises again in the reading task
            early = payload.read_nowait()  # body bytes aiohttp already took (none: heads are split)
            if early:
                pieces.append((arrived, early))
                pieces.marks.append(0)
        if _chunked_head(head) and not getattr(self, "_skip_payload", True):
            self._chunked = ChunkedBody(pieces)


class StampingConnector(aiohttp.TCPConnector):
    """TCPConnector whose connections stamp body arrival times (see module docstring)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if hasattr(self, "_factory"):
            self._factory = functools.partial(StampingHandler, loop=self._loop)  # type: ignore[assignment]


async def read_stamped(content: StreamReader, reads: list[tuple[int, bytes]]) -> None:
    """Append the body's stamped pieces to `reads` (kept on timeout, error or cancellation)."""
    key = id(content)
    if key not in _READS:  # not a stamping connection: stamp as each read returns
        async for data in content.iter_any():
            reads.append((time.perf_counter_ns(), data))
        return
    try:
        while await content.readany():
            pass
    finally:
        pieces = _READS.pop(key, ())
        if isinstance(reads, Reads) and isinstance(pieces, Reads) and len(reads) == len(reads.marks):
            reads.marks += pieces.marks
        reads.extend(pieces)
