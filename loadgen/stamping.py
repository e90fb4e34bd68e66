"""Arrival timestamps for streamed response bodies, taken where the bytes enter Python.

The load session's connector builds `StampingHandler` connection protocols. When a response's
headers have been parsed (inside the protocol's `data_received`, before any task runs), its body
reader is switched to `StampingReader` (same slots, so `__class__` assignment is allowed): from then
on each piece of body the HTTP parser hands over is recorded as `(perf_counter_ns(), bytes)` and not
buffered, so the reading task is woken once at end of body instead of once per chunk, and a busy
event loop delays no timestamp. Body bytes that came in the same read as the headers get that
read's time. Only the load session uses this connector: `resp.read()` returns nothing there.
"""

from __future__ import annotations

import contextlib
import functools
import time
from typing import Any

import aiohttp
from aiohttp.client_proto import ResponseHandler
from aiohttp.streams import StreamReader

_READS: dict[int, list[tuple[int, bytes]]] = {}  # id(reader) -> stamped body pieces


class StampingReader(StreamReader):
    """A body reader that records each piece with its arrival time instead of buffering it."""

    __slots__ = ()

    def feed_data(self, data: bytes, size: int = 0) -> bool:
        if data:
            _READS[id(self)].append((time.perf_counter_ns(), data))
            self.total_bytes += len(data)
        return False

    def end_http_chunk_receiving(self) -> None:
        return None  # no chunk bookkeeping and no wake-up per HTTP chunk


class StampingHandler(ResponseHandler):
    """Connection protocol that switches each new response body to a StampingReader."""

    def data_received(self, data: bytes) -> None:
        arrived = time.perf_counter_ns()
        before = getattr(self, "_payload", None)  # aiohttp internals: degrade to plain reads if they move
        super().data_received(data)
        payload = getattr(self, "_payload", None)
        if payload is not None and payload is not before and type(payload) is StreamReader:
            key = id(payload)
            _READS[key] = []
            try:
                payload.__class__ = StampingReader
            except TypeError:  # aiohttp changed the reader's layout: keep plain reads
                del _READS[key]
                return
            with contextlib.suppress(Exception):  # a failed body raises again in the reading task
                early = payload.read_nowait()  # body bytes that came with the headers
                if early:
                    _READS[key].append((arrived, early))


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
        reads.extend(_READS.pop(key, ()))
