"""Open-loop dispatch: send each request at its scheduled time, whatever the server is doing.

The sender sleeps until just before a request's scheduled time (asyncio timers only have 1 ms
resolution with epoll) and then yields to the event loop until the time arrives, so sends are late
by the loop's own delay only. A request waiting for a `--max-concurrency` slot is sent late, and
that lateness is recorded as schedule lag (actual send - scheduled send), never hidden.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import aiohttp

from loadgen.client import RequestRecord, request_headers, send_request

SPIN_NS = 1_100_000  # yield-spin this close to a send time instead of sleeping


async def sleep_until(due_ns: int, spin_ns: int = SPIN_NS) -> None:
    """Return as soon after perf_counter_ns() >= due_ns as the event loop allows."""
    now = time.perf_counter_ns
    while True:
        remaining = due_ns - now()
        if remaining <= 0:
            return
        await asyncio.sleep((remaining - spin_ns) / 1e9 if remaining > spin_ns else 0)


@dataclass
class Dispatcher:
    """Sends prepared requests on schedule and tracks the ones in flight."""

    session: aiohttp.ClientSession
    url_of: Callable[[str], str]
    api_key: str | None
    max_concurrency: int | None
    on_done: Callable[[RequestRecord], None]
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    in_flight: set[asyncio.Task[RequestRecord]] = field(default_factory=set)
    records: list[RequestRecord] = field(default_factory=list)
    by_task: dict[asyncio.Task[RequestRecord], RequestRecord] = field(default_factory=dict)
    active: int = 0  # requests between send and completion (the in_flight set lags by a callback)
    peak_in_flight: int = 0

    def __post_init__(self) -> None:
        self._slots = asyncio.Semaphore(self.max_concurrency) if self.max_concurrency else None

    async def _one(self, record: RequestRecord, path: str, body: bytes) -> RequestRecord:
        headers = request_headers(self.api_key, record.x_request_id)
        try:
            return await send_request(self.session, self.url_of(path), body, headers, record)
        finally:
            self.active -= 1
            if self._slots is not None:
                self._slots.release()

    def _finished(self, task: asyncio.Task[RequestRecord]) -> None:
        self.in_flight.discard(task)
        self.on_done(self.by_task.pop(task))

    async def send_at(self, due_ns: int, record: RequestRecord, path: str, body: bytes) -> bool:
        """Wait for the send time (and a slot), then start the request; False when stopped."""
        await sleep_until(due_ns)
        if self._slots is not None:
            await self._slots.acquire()
        if self.stop.is_set():
            if self._slots is not None:
                self._slots.release()
            return False
        task = asyncio.get_running_loop().create_task(self._one(record, path, body))
        self.by_task[task] = record
        self.records.append(record)
        self.in_flight.add(task)
        self.active += 1
        self.peak_in_flight = max(self.peak_in_flight, self.active)
        task.add_done_callback(self._finished)
        return True

    async def drain(self, cancel: bool) -> None:
        """Wait for (or cancel) every request in flight; each one still gets its outcome."""
        if cancel:
            for task in list(self.in_flight):
                task.cancel()
        while self.in_flight:
            await asyncio.gather(*list(self.in_flight), return_exceptions=True)


def connector_limit(max_concurrency: int | None, total: int | None, rate: float) -> int:
    """Connection-pool size for the load (aiohttp's default of 100 would silently cap concurrency)."""
    if max_concurrency:
        return max_concurrency
    if total is not None:
        return max(total, 1)
    return 0 if math.isinf(rate) else 10_000  # 0 = no limit
