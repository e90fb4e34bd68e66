"""Open-loop dispatch: send each request at its scheduled time, whatever the server is doing.

The sender sleeps with asyncio until 2 ms before a request's scheduled time and lets a helper thread
sleep the rest precisely (asyncio timers only have 1 ms resolution with epoll), so sends are late
by the loop's own delay only. A request waiting for a `--max-concurrency` slot is due when its slot
comes free: that wait is recorded as slot wait (the queueing the user asked for), and what is left,
actual send - due time, as schedule lag (the client's own lateness), never hidden.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import heapq
import logging
import math
import os
import queue
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from loadgen.records import RequestRecord
from loadgen.transport import kernel_stamps
from loadgen.transport.finish import request_headers
from loadgen.transport.rawhttp import RawClient

if TYPE_CHECKING:
    import aiohttp

COARSE_MARGIN_NS = 2_000_000  # asyncio timers wake up to 1 ms late (epoll); stop them 2 ms early
AHEAD_NS = 5_000_000  # a raw request is readied this early; the waker writes it on time
BATCH_NS = 5_000_000  # ... or up to this much earlier, to ready the requests of a batch on one wake-up
CANCEL_BATCH = 1000  # requests cancelled per event-loop step at a stop (see Dispatcher.drain)


Action = Callable[[], object]
IDLE = 1 << 62  # the waker's target while it has no deadline


def _wake(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


def _prefer_cpu() -> None:
    """Let the waker thread preempt the busy event-loop thread the moment its deadline comes (Linux's
    EEVDF scheduler otherwise lets a running thread finish its ~3 ms slice first): real-time priority
    where permitted (root, CAP_SYS_NICE), else nothing changes (the C writer, which sends where it is
    built, also tries EEVDF's short slice: `_kread.c`'s prefer_cpu). Its timed waits end at their deadline,
    not up to the thread's timer slack (50 µs) later, where the C module is built. The thread only sleeps
    and writes."""
    kernel_stamps.precise_timers()
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
    except (AttributeError, OSError):
        kernel_stamps.note_waker_priority("none")
    else:
        kernel_stamps.note_waker_priority("realtime")


class PreciseWaker:
    """Runs actions at perf_counter_ns deadlines to within ~0.1 ms, at little CPU cost.

    asyncio sleeps to the millisecond at best (epoll's timeout unit), so the last stretch before a send
    is slept by a helper thread (a timed wait, nanosecond timer). No busy-waiting. `post_at` has the
    thread itself do the send (a socket write) at the deadline, so it does not wait for the loop at
    all; `sleep_until` wakes the loop through `call_soon_threadsafe`.

    Deadlines are posted on a deque; the thread is rung awake only when a new deadline is earlier than
    the one it sleeps until (sends are posted in time order, so it usually wakes once per send).

    Where the C module is built, `post_write` hands a send to its writer thread instead (no GIL, no
    Python per send: `_kread.c`'s `Sender`); `post_at` stays for everything else.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._posted: collections.deque[tuple[int, Action]] = collections.deque()
        self._bell: queue.SimpleQueue[None] = queue.SimpleQueue()
        self._target = 0  # the deadline the thread sleeps until; 0 while it is awake, IDLE with none
        self._closing = False
        self._thread = threading.Thread(target=self._serve, name="loadgen-waker", daemon=True)
        self._thread.start()
        self._sender: Any = None  # the C writer (`post_write`), started at its first post
        self._doorbell = (-1, -1)

    def post_write(self, due_ns: int, fd: int, data: bytes, attention: Callable[[Any], None]) -> Any | None:
        """Write `data` to the socket `fd` at `due_ns` from the C writer's own thread (no GIL: the send
        never waits for the loop's Python work) and return its ticket (`sent_ns` stamped right after
        the write); `attention(ticket)` runs in the loop when it was not written whole. None where the
        C module is not built (or LOADGEN_NATIVE=0): then use `post_at`."""
        sender = self._sender
        if sender is None:
            if self._closing or not kernel_stamps.native():
                return None
            sender = self._sender = self._start_sender()
        ticket = kernel_stamps.Ticket(attention)
        sender.post(due_ns, fd, data, ticket)
        return ticket

    def retire(self, fd: int) -> None:
        """`fd` is about to be closed: drop its posts (a write in progress finishes first)."""
        if self._sender is not None:
            self._sender.retire(fd)

    def _start_sender(self) -> Any:
        read_end, write_end = os.pipe()
        os.set_blocking(read_end, False)
        os.set_blocking(write_end, False)
        self._doorbell = (read_end, write_end)
        self._loop.add_reader(read_end, self._attend)
        kernel_stamps.sender_started()
        return kernel_stamps.Sender(write_end)

    def _attend(self) -> None:
        """The C writer rang: hand the tickets that were not written whole to their owners."""
        with contextlib.suppress(BlockingIOError):
            while os.read(self._doorbell[0], 4096):
                pass
        self._tell(self._sender.collect())

    @staticmethod
    def _tell(tickets: list[Any]) -> None:
        for ticket in tickets:
            _run(partial(ticket.owner, ticket))

    def _serve(self) -> None:
        """Serve the deadlines in time order (a request readied late may be due before one posted
        earlier); after `close`, the ones already posted are still served."""
        _prefer_cpu()
        now = time.perf_counter_ns
        posted, seq = self._posted, 0
        heap: list[tuple[int, int, Action]] = []
        while True:
            while posted:
                due, action = posted.popleft()
                seq += 1
                heapq.heappush(heap, (due, seq, action))
            if heap and heap[0][0] <= now():
                _run(heapq.heappop(heap)[2])
                continue
            if not heap and self._closing:
                return
            self._target = heap[0][0] if heap else IDLE
            if not posted:  # a post after this check sees the target and rings if it is earlier
                with contextlib.suppress(queue.Empty):
                    if heap:
                        self._bell.get(timeout=max(heap[0][0] - now(), 0) / 1e9)
                    else:
                        self._bell.get()
            self._target = 0

    def post_at(self, due_ns: int, action: Action) -> None:
        """Run `action` in the helper thread at `due_ns` (it reports to the loop itself, if it must)."""
        self._posted.append((due_ns, action))
        if due_ns < self._target:
            self._bell.put(None)

    async def sleep_until(self, due_ns: int) -> None:
        """Return as soon after perf_counter_ns() >= due_ns as the event loop allows."""
        await _coarse_sleep(due_ns, COARSE_MARGIN_NS)
        if due_ns - time.perf_counter_ns() > 0:
            fut = self._loop.create_future()
            self.post_at(due_ns, partial(self._loop.call_soon_threadsafe, _wake, fut))
            await fut

    async def sleep_until_ahead(self, due_ns: int) -> None:
        """Sleep with asyncio to about AHEAD_NS before `due_ns` (the rest is `post_at`'s), unless that
        is less than BATCH_NS away: requests due within one batch window are readied on one wake-up."""
        remaining = due_ns - time.perf_counter_ns()
        if remaining > AHEAD_NS + BATCH_NS:
            await asyncio.sleep((remaining - AHEAD_NS) / 1e9)
        else:
            await asyncio.sleep(0)  # reads that arrived meanwhile are stamped before the next request

    def close(self) -> None:
        """Stop the helper thread, and the C writer, once what was posted so far is served."""
        self._closing = True
        self._bell.put(None)
        sender, self._sender = self._sender, None
        if sender is not None:
            sender.close()
            self._tell(sender.collect())
            self._loop.remove_reader(self._doorbell[0])
            for fd in self._doorbell:
                os.close(fd)


def _run(action: Action) -> None:
    try:
        action()
    except Exception:  # noqa: BLE001 - an action reports its own failures; the thread must live on
        logging.getLogger(__name__).exception("send-time action failed")


@dataclass
class Dispatcher:
    """Sends prepared requests on schedule and tracks the ones in flight."""

    session: aiohttp.ClientSession | None  # None with `raw`
    url_of: Callable[[str], str]
    api_key: str | None
    max_concurrency: int | None
    on_done: Callable[[RequestRecord], None]
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    in_flight: set[asyncio.Task[RequestRecord]] = field(default_factory=set)
    records: list[RequestRecord] = field(default_factory=list)
    by_task: dict[asyncio.Task[RequestRecord], RequestRecord] = field(default_factory=dict)
    active: int = 0  # requests started and not finished
    peak_in_flight: int = 0
    raw: RawClient | None = None  # `--http-client raw`: requests go through it instead of `session`
    # called as each request is handed to the client, with its lateness then (ns): live lateness
    # must move while requests are in flight, not when they finish
    on_sent: Callable[[RequestRecord, int], None] | None = None

    def __post_init__(self) -> None:
        self._slots = asyncio.Semaphore(self.max_concurrency) if self.max_concurrency else None
        # when each free slot came free, oldest first (the semaphore hands slots out in that order)
        self._freed: collections.deque[int] = collections.deque([0] * (self.max_concurrency or 0))
        self._headers = request_headers(self.api_key, "")  # copied per request with its X-Request-Id
        self.waker = PreciseWaker(asyncio.get_running_loop())
        self._send_aiohttp: Any = None
        if self.session is not None:  # aiohttp is imported only by the run that loads through it
            from loadgen.transport.aiohttp_client import send_request

            self._send_aiohttp = send_request

    @property
    def ahead(self) -> bool:
        """Whether a request is readied about AHEAD_NS before its time (the raw client without
        --max-concurrency: the waker writes it on time), rather than started at its time."""
        return self.raw is not None and self._slots is None

    def _request(
        self, record: RequestRecord, path: str, body: bytes, due_ns: int
    ) -> Coroutine[Any, Any, RequestRecord]:
        if self.raw is not None:
            return self.raw.send(record, path, body, due_ns, self.waker.post_at, self.waker)
        assert self.session is not None
        headers = {**self._headers, "X-Request-Id": record.x_request_id}
        return self._send_aiohttp(self.session, self.url_of(path), body, headers, record)

    def _finished(self, task: asyncio.Task[RequestRecord]) -> None:
        self.active -= 1
        if self._slots is not None:
            self._freed.append(time.perf_counter_ns())
            self._slots.release()
        self.in_flight.discard(task)
        record = self.by_task.pop(task)
        failed = None if task.cancelled() else task.exception()  # retrieved: never "never retrieved"
        if failed is not None and record.outcome is None and record.fallback is None:
            # the clients map every failure to an outcome; one they did not foresee still gets one
            record.done_ns = time.perf_counter_ns()
            record.fallback = ("protocol_error", f"unexpected {type(failed).__name__}: {failed}"[:300])
        self.on_done(record)

    async def send_at(
        self, due_ns: int, record: RequestRecord, path: str, body: bytes, deadline_ns: int | None = None
    ) -> bool:
        """Wait for the send time (and a slot), then start the request; False when stopped or past
        `deadline_ns` (the end of a `--duration` run) by the time a slot came free.

        The raw client without --max-concurrency starts the request a little ahead: it readies a
        connection and the waker thread writes the request at `due_ns` (see RawClient.send)."""
        ahead = self.ahead
        if ahead:
            await self.waker.sleep_until_ahead(due_ns)
        else:
            await self.waker.sleep_until(due_ns)
        if self._slots is not None:
            await self._slots.acquire()
            record.slot_free_ns = self._freed.popleft()  # due = max(scheduled, this)
        if self.stop.is_set() or (deadline_ns is not None and time.perf_counter_ns() >= deadline_ns):
            if self._slots is not None:
                self._freed.appendleft(record.slot_free_ns)
                self._slots.release()
            return False
        if self.on_sent is not None:
            self.on_sent(record, time.perf_counter_ns() - record.due_ns)
        request = self._request(record, path, body, due_ns if ahead else 0)
        task = asyncio.get_running_loop().create_task(request)
        self.by_task[task] = record
        self.records.append(record)
        self.in_flight.add(task)
        self.active += 1
        self.peak_in_flight = max(self.peak_in_flight, self.active)
        task.add_done_callback(self._finished)
        return True

    async def drain(self, cancel: bool) -> None:
        """Wait for (or cancel) every request in flight; each one still gets its outcome.

        Cancelled CANCEL_BATCH at a time, each batch awaited: cancelling all at once ran every
        request's cancellation in one event-loop step (55,840 in flight blocked the loop for 79 s,
        signals and the monitor included); in batches the loop is never held longer than one batch
        (about 0.13 ms a request here, so ~0.13 s), and the whole stop costs that per request."""
        if cancel:
            tasks = list(self.in_flight)
            for start in range(0, len(tasks), CANCEL_BATCH):
                batch = tasks[start : start + CANCEL_BATCH]
                for task in batch:
                    task.cancel()
                await asyncio.gather(*batch, return_exceptions=True)
        while self.in_flight:
            await asyncio.gather(*list(self.in_flight), return_exceptions=True)


def connector_limit(max_concurrency: int | None, total: int | None, rate: float) -> int:
    """Connection-pool size for the load (aiohttp's default of 100 would silently cap concurrency)."""
    if max_concurrency:
        return max_concurrency
    if total is not None:
        return max(total, 1)
    return 0 if math.isinf(rate) else 10_000  # 0 = no limit


async def _coarse_sleep(due_ns: int, margin_ns: int) -> None:
    """asyncio.sleep until `margin_ns` before `due_ns` (event-loop timers resolve to about 1 ms)."""
    remaining = due_ns - time.perf_counter_ns()
    if remaining > margin_ns:
        await asyncio.sleep((remaining - margin_ns) / 1e9)
