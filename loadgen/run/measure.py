"""The live part of one run: open-loop dispatch, the finisher that parses finished requests,
progress and loop-lag monitoring, the error budget, stop on Ctrl-C / SIGTERM, and the linger."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import gc
import itertools
import math
import signal
import sys
import time
from array import array
from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from operator import sub
from typing import TYPE_CHECKING, Any

from infergauge.fdlimit import limit_line
from loadgen import jsonbytes
from loadgen.config import RunConfig
from loadgen.prefix_cache import SentBlocks
from loadgen.records import RequestRecord
from loadgen.results.journal import Journal
from loadgen.run.backlog import Backlog, Bound, held_bytes, warning
from loadgen.run.client_cpu import ClientCpu
from loadgen.run.progress import Counts, Progress
from loadgen.run.stalls import Stalls
from loadgen.stats import NS, meets_slo
from loadgen.targets import Target
from loadgen.transport.dispatch import Dispatcher
from loadgen.transport.finish import finalize
from loadgen.workload.generator import RequestSpec, SentDigest
from loadgen.workload.shard import perf_base

if TYPE_CHECKING:
    from loadgen.run.live_metrics import LiveMetrics
    from loadgen.run.unserved_metrics import UnservedMetrics

MIN_FOR_BUDGET = 20  # finished requests before --max-error-rate may stop a run early
SWITCH_INTERVAL_S = 0.0002  # GIL hand-over delay during a run (Python's default is 5 ms)
OPENING_NS = 250_000_000  # the schedule's opening stretch whose connections are opened before the start
MAX_PRECONNECT = 512
PRECONNECT_TIMEOUT_S = 2.0
FINISH_SLICE_NS = 200_000  # parsing of finished requests between two yields to the event loop
# The finisher waits up to FINISH_GATHER_S for FINISH_GATHER finished requests and parses them together:
# one parsed on its own, between reads and sends, costs more than in a batch (its code and data are out
# of the cache: 60-71 against 49 µs a 32-token request at 400 req/s on the development VM; issue #23).
# Live metrics and the error budget see a request at most FINISH_GATHER_S after it ends; its record
# and its time stamps are the same.
FINISH_GATHER, FINISH_GATHER_S = 16, 0.02
SPLIT_READS = (
    64  # a finished stream of at least this many reads is parsed, then encoded, with a yield between
)
GC_TICKS = 240  # monitor ticks (0.25 s) between garbage collections during a run (see paced_gc)
RELEASED: tuple[int, ...] = ()  # token_ns of a request whose line is on disk (see Run.release)
KEPT_GAPS = 262_144  # released requests' ITLs held for the summary (2 MB); a run with more reads them back
BACKLOG_BOUND = Bound()  # finished requests held unparsed at most (see backlog.py)
PREP_BATCH = 16  # requests drawn and encoded together, ahead of their sends (see Prepared)


class Run:
    """State of one run between preflight and the record."""

    def __init__(
        self,
        config: RunConfig,
        run_id: str,
        progress: bool,
        *,
        indices: Sequence[int] | None = None,
        start_at: datetime | None = None,
    ) -> None:
        self.config = config
        self.run_id = run_id
        self.progress = Progress(progress)
        self.stop_reason: str | None = None
        self.metrics: LiveMetrics | UnservedMetrics | None = None
        self.dispatcher: Dispatcher | None = None
        self.finished = 0
        self.failed = 0
        self.start_ns = 0
        self.sent = SentDigest()  # the fingerprint of what was sent, digested by the finisher
        self.kept: SentBlocks | None = None  # the sent prompts' blocks, for the implied cache figures
        self.gaps: array[int] | None = array("q")  # released requests' ITLs while they fit (release)
        self.dispatch_task: asyncio.Task[None] | None = None
        self.finished_queue: asyncio.Queue[tuple[RequestRecord, int]] = asyncio.Queue()
        self.backlog = Backlog(BACKLOG_BOUND)
        self.hurry = False  # a second interrupt: no linger
        self.journal: Journal | None = None  # requests.jsonl while the run goes (crash-safe record)
        self.indices = indices  # a shard's global request indices (None: 0, 1, ...)
        self.start_at = start_at  # a common wall-clock start (shards), else 5 ms from now
        self.fd_said = False  # the open-files limit was said to bind (once a run)
        self.stalls = Stalls()  # host stalls: the event loop not running (loadgen/run/stalls.py)
        self.cpu = ClientCpu()  # what the load cost loadgen itself (`client_cpu` in the summary)

    def on_done(self, record: RequestRecord) -> None:
        """A request finished: queue it for parsing (kept off the hot path while streams run)."""
        size = held_bytes(record.raw)
        self.backlog.add(size)
        self.finished_queue.put_nowait((record, size))

    async def finisher(self) -> None:
        """Parse finished requests in batches (FINISH_GATHER) and in slices of about FINISH_SLICE_NS,
        yielding to the event loop between slices so reads of other streams are stamped and sends go
        out in between; while the backlog is over its bound, parse without yielding until it is drained
        (backlog.py)."""
        queue = self.finished_queue
        now = time.perf_counter_ns
        while True:
            item = await queue.get()
            if queue.qsize() < FINISH_GATHER - 1 and not self.backlog.saturated:
                await asyncio.sleep(FINISH_GATHER_S)  # let a batch gather (see FINISH_GATHER)
            until = now() + FINISH_SLICE_NS
            while True:
                record, size = item
                if len(record.raw or ()) >= SPLIT_READS and self._may_yield(now()):
                    await self._parse_in_two(record, size)
                else:
                    self._parse(record, size)
                if queue.empty():
                    break  # the next `get` yields to the event loop
                if now() >= until and self._may_yield(now()):
                    await asyncio.sleep(0)  # more is waiting: let reads and sends go first
                    until = now() + FINISH_SLICE_NS
                item = queue.get_nowait()
            self.backlog.leave(now())

    def _take(self, record: RequestRecord) -> None:
        """Parse and account a finished request (the first step of `_parse` and `_parse_in_two`)."""
        self.stalls.overdue(time.perf_counter_ns())  # a stall the monitor has not woken from yet
        self.stalls.stamp(record)
        self.account(finalize(record))

    def _parse(self, record: RequestRecord, size: int) -> None:
        try:
            self._take(record)
            if self.journal is not None:
                self.journal.add(record, self.start_ns)
            self.sent.catch_up()  # keeps up with the sends (one finishes per send), in short slices
        finally:
            self.backlog.remove(size)
            self.finished_queue.task_done()

    async def _parse_in_two(self, record: RequestRecord, size: int) -> None:
        """`_parse` of a long stream in two steps with a yield between: the parse, then the line's
        encoding (each about as long as the other for 256 tokens), so the reads that came in during
        the first are stamped before the second instead of after both (ITL accuracy, #23)."""
        try:
            self._take(record)
            await asyncio.sleep(0)
            if self.journal is not None:
                self.journal.add(record, self.start_ns)
            self.sent.catch_up()
        finally:
            self.backlog.remove(size)
            self.finished_queue.task_done()

    def release(self, record: RequestRecord) -> None:
        """A request's line is on disk: let its per-token times go, so memory does not grow with the
        tokens streamed. The summary's ITLs of a measured ok request are kept (8 bytes a gap) while
        the run's fit in KEPT_GAPS; past that none are, and the summary reads them all back from the
        journal (the same integers: `record.line_itls_ns`)."""
        gaps = self.gaps
        if gaps is not None and not record.warmup and record.outcome == "ok":
            t = record.token_ns
            if len(gaps) + len(t) > KEPT_GAPS:
                self.gaps = None  # a long run: memory stays flat, the journal has them
            else:
                gaps.extend(map(sub, t[1:], t))
        record.token_ns = RELEASED

    def _may_yield(self, now_ns: int) -> bool:
        """False while the backlog is over its bound and not yet drained: parse before reading more."""
        backlog = self.backlog
        if backlog.saturated:
            if not backlog.drained():
                return False
            backlog.leave(now_ns)
            return True
        if backlog.over():
            if backlog.enter(now_ns):
                print(warning(backlog), file=sys.stderr, flush=True)
            return False
        return True

    def account(self, record: RequestRecord) -> None:
        """Account a parsed request; stop the run when the error budget is exhausted."""
        met = bool(self.config.slo) and meets_slo(record, self.config.slo)
        if self.metrics is not None and self.metrics.address is not None:  # unserved: nobody reads them
            self.metrics.observe(record, met)  # the in-flight gauge is the monitor's (4 times a second)
        if record.warmup or record.outcome == "cancelled":
            return
        if record.outcome == "connect_error" and not self.fd_said and _out_of_fds(record.error):
            self.fd_said = True
            print(limit_line("loadgen"), file=sys.stderr, flush=True)
        self.finished += 1
        self.failed += record.outcome != "ok"
        rate = self.failed / self.finished
        if self.finished >= MIN_FOR_BUDGET and rate > self.config.max_error_rate and self.stop_reason is None:
            self.request_stop(
                f"error rate {rate:.0%} exceeded --max-error-rate {self.config.max_error_rate:g}"
            )

    def on_signal(self, sig: signal.Signals) -> None:
        """Ctrl-C / SIGTERM: the first stops the run; a later one also cuts the linger short."""
        if self.stop_reason is not None:
            self.hurry = True
        self.request_stop(f"interrupted by {sig.name}")

    def request_stop(self, reason: str) -> None:
        """Stop dispatching and cancel what is in flight (first reason wins)."""
        if self.stop_reason is None:
            self.stop_reason = reason
        if self.dispatcher is not None:
            self.dispatcher.stop.set()
        if self.dispatch_task is not None and not self.dispatch_task.done():
            self.dispatch_task.cancel()  # it may be waiting for a send time or a concurrency slot

    async def monitor(self, total: int | None) -> None:
        """Progress display, in-flight and event-loop lag gauges, journal flush (4 times a second)."""
        tick, ticks = 0.25, 0
        while True:
            expected = self.stalls.expected_ns = time.perf_counter_ns() + int(tick * NS)
            await asyncio.sleep(tick)
            woke = time.perf_counter_ns()
            self.stalls.woke(expected, woke)
            lag = max(woke - expected, 0) / NS
            ticks += 1
            if ticks % GC_TICKS == 0:  # see `paced_gc`
                gc.collect()
            if self.journal is not None:
                self.journal.flush()
            d = self.dispatcher
            if self.metrics is not None:
                self.metrics.loop_lag.set(lag)
                self.metrics.in_flight.set(d.active if d is not None else 0)
                self.metrics.unparsed_backlog.set(self.backlog.requests)
            if d is not None:
                self.progress.update(Counts(self.finished, total, d.active, self.failed))

    async def dispatch(self, target: Target, workload: Any, model: str, schedule: list[int]) -> None:
        """Send every scheduled request (cancelled by `request_stop`); fills start_ns and `sent`."""
        assert self.dispatcher is not None
        self.cpu.start()
        if getattr(workload, "name", None) == "sessions":  # closed-loop turns: loadgen.run.sessions
            from loadgen.run.sessions import drive_sessions

            await drive_sessions(self, target, workload, model)
            return
        cfg = self.config
        await self._preconnect(schedule)
        indices = range(len(schedule)) if self.indices is None else self.indices
        session_turn = getattr(workload, "session_turn", None)
        # in batches only where requests are readied ahead of their time (a batch then holds no send up)
        batch = PREP_BATCH if self.dispatcher.ahead else 1
        prepared = Prepared(target, workload, model, cfg, zip(indices, schedule, strict=True), batch)
        prepared.fill()  # the first batch before the start: its sends are not held up by it
        self.start_ns = perf_base(self.start_at)
        horizon = None if cfg.duration_s is None else self.start_ns + int(cfg.duration_s * 1e9)
        try:
            for index, offset, spec, path, body in prepared:
                due = self.start_ns + offset
                if horizon is not None and max(due, time.perf_counter_ns()) >= horizon:
                    break
                record = RequestRecord(
                    index,
                    f"{self.run_id}-{index:06d}",
                    index < cfg.warmup,
                    due,
                    spec.input_len,
                    spec.output_len,
                )
                if session_turn is not None:  # a trace's conversations (loadgen.workload.trace)
                    record.session_id, record.turn_index = session_turn(index)
                if not await self.dispatcher.send_at(due, record, path, body, horizon):
                    break
                prepared.sent()
                self.sent.add(spec)
        finally:
            prepared.close()

    async def _preconnect(self, schedule: list[int]) -> None:
        """Open the connections the opening stretch of the schedule needs before it starts (raw client)."""
        raw = self.dispatcher.raw if self.dispatcher is not None else None
        if raw is None or not schedule:
            return
        count = opening_connections(schedule, self.config.max_concurrency)
        await raw.preconnect(count, PRECONNECT_TIMEOUT_S)


class Prepared:
    """The run's requests drawn from the workload and encoded PREP_BATCH at a time, ahead of their sends
    (issue #23): iterated as (index, offset, spec, path, body). One request drawn and encoded on its own,
    between the reads and sends of a run, costs about three times what it costs in a tight loop (the
    interpreter's code and data are out of the cache by then: ~37 against ~12 µs for a 32-token prompt on
    the development VM); a batch pays that once. A batch (~0.2-0.4 ms) is made right after a request is
    readied, about AHEAD_NS before its time (the raw client's sends: Dispatcher.ahead), so it holds no
    send up; where requests start at their time (--max-concurrency, aiohttp) the batch is one request,
    drawn before its wait as always. Requests drawn and never sent (a stop, the end of a --duration
    run) are given back to the workload (`unsent`, where it has one), so its facts count only what was
    sent (`clipped_requests`)."""

    def __init__(
        self,
        target: Target,
        workload: Any,
        model: str,
        config: RunConfig,
        pairs: Iterator[tuple[int, int]],
        batch: int = PREP_BATCH,
    ) -> None:
        self.target, self.workload, self.model, self.config = target, workload, model, config
        self._pairs, self._size = pairs, batch
        self._batch: collections.deque[tuple[int, int, RequestSpec, str, bytes]] = collections.deque()
        self._taken: int | None = None  # the index handed out last, until `sent`
        self._error: Exception | None = None  # drawing or encoding a request failed (a loadgen bug)

    def fill(self) -> None:
        """Draw and encode the next batch (nothing where the schedule is done or a request failed)."""
        if self._error is not None:
            return
        build, compact, request = self.target.build_payload, jsonbytes.compact, self.workload.request
        model, endpoint, ignore_eos = self.model, self.config.endpoint, self.config.ignore_eos
        batch = self._batch
        for index, offset in itertools.islice(self._pairs, self._size):
            try:
                spec = request(index)
                path, payload = build(spec, model=model, endpoint=endpoint, ignore_eos=ignore_eos)
                batch.append((index, offset, spec, path, compact(payload)))
            except Exception as exc:  # noqa: BLE001 - raised where this request's turn comes (__next__)
                self._error = exc
                return

    def __iter__(self) -> Prepared:
        return self

    def __next__(self) -> tuple[int, int, RequestSpec, str, bytes]:
        if not self._batch:
            self.fill()
            if not self._batch:
                if self._error is not None:  # the requests before it were sent, as one at a time
                    raise self._error
                raise StopIteration
        item = self._batch.popleft()
        self._taken = item[0]
        return item

    def sent(self) -> None:
        """The request handed out last was sent."""
        self._taken = None

    def close(self) -> None:
        """The dispatch ended: what was drawn and not sent goes back to the workload."""
        unsent = ([] if self._taken is None else [self._taken]) + [item[0] for item in self._batch]
        self._batch.clear()
        give_back = getattr(self.workload, "unsent", None)
        if unsent and give_back is not None:
            give_back(unsent)


def opening_connections(schedule: list[int], max_concurrency: int | None) -> int:
    """Requests due in the schedule's first OPENING_NS (none of them can reuse a connection yet: a
    response takes longer), at most --max-concurrency and MAX_PRECONNECT."""
    first = schedule[0]
    count = bisect_right(schedule, first + OPENING_NS)
    return min(count, max_concurrency or count, MAX_PRECONNECT)


def _out_of_fds(error: str | None) -> bool:
    """A connect error that says the process (EMFILE) or system (ENFILE) is out of descriptors."""
    return error is not None and ("[Errno 24]" in error or "[Errno 23]" in error)


_ROUTES: list[Callable[[signal.Signals], None]] = []  # signal handlers in force, innermost last


@contextlib.contextmanager
def route_signals(handler: Callable[[signal.Signals], None]) -> Iterator[None]:
    """SIGINT / SIGTERM on the running loop call `handler(sig)` while active, then go back to the
    enclosing route (or the default: KeyboardInterrupt / termination) when none encloses it."""
    loop = asyncio.get_running_loop()
    _ROUTES.append(handler)
    installed = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, handler, sig)
            installed.append(sig)
        except (NotImplementedError, RuntimeError, ValueError):  # not the main thread / platform
            pass
    try:
        yield
    finally:
        _ROUTES.remove(handler)
        for sig in installed:
            if _ROUTES:
                loop.add_signal_handler(sig, _ROUTES[-1], sig)
            else:
                loop.remove_signal_handler(sig)


async def execute(
    run: Run, target: Target, workload: Any, model: str, schedule: list[int]
) -> tuple[int, str]:
    """Dispatch, wait for the requests in flight (or cancel them on a stop), keep the display going.

    Returns (start_ns, fingerprint of the requests sent)."""
    assert run.dispatcher is not None
    known = run.config.total_requests is not None or not math.isinf(run.config.rate)
    monitor = asyncio.create_task(run.monitor(len(schedule) if known else None))
    switch_interval = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_INTERVAL_S)  # the send-time waker thread gets the GIL quickly
    finisher = asyncio.create_task(run.finisher())
    try:
        run.dispatch_task = asyncio.create_task(run.dispatch(target, workload, model, schedule))
        try:
            await run.dispatch_task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if run.stop_reason is None or (current is not None and current.cancelling()):
                raise  # we were cancelled from outside, not stopped by request_stop
        if run.stop_reason is None:
            await drain_until_stopped(run)
        await run.dispatcher.drain(cancel=True)
        await run.finished_queue.join()  # every request parsed and accounted
        run.cpu.stop()
        return run.start_ns, run.sent.value()
    finally:
        run.cpu.stop()  # a load cut short (cancelled, failed) ends here
        sys.setswitchinterval(switch_interval)
        run.dispatcher.waker.close()
        monitor.cancel()
        finisher.cancel()
        run.progress.close()


@contextlib.contextmanager
def paced_gc() -> Iterator[None]:
    """Take garbage collection off the request path for the run and the writing of its record.

    Python's automatic collections stop the event loop at moments set by allocation counts, which
    shows up as schedule lag and late timestamps (at 400 req/s on the development VM, turning them off
    cut schedule-lag p99 from 5.0-9.6 to 2.5-3.8 ms and TTFT error p99 from 3.1-4.7 to 1.6-2.0 ms), and
    full collections over a run's records cost more CPU than writing them. A request leaves only about
    four objects in reference cycles (refcounting frees the rest), so while this is active the monitor
    collects once a minute instead; what existed before is frozen out of those collections (and given
    back to the collector after)."""
    enabled = gc.isenabled()
    gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        gc.unfreeze()
        if enabled:
            gc.enable()


async def drain_until_stopped(run: Run) -> None:
    """Wait for the requests in flight, returning early when a stop is requested."""
    assert run.dispatcher is not None
    d = run.dispatcher
    if not d.in_flight:
        return
    # dispatch is over, so the set is final
    everything: asyncio.Future[Any] = asyncio.gather(*d.in_flight, return_exceptions=True)
    stopper: asyncio.Future[Any] = asyncio.ensure_future(d.stop.wait())
    try:
        await asyncio.wait([everything, stopper], return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopper.cancel()


async def linger(run: Run, seconds: float) -> None:
    """Keep /metrics up so the last scrape sees the final counts (a stop request ends it early)."""
    assert run.dispatcher is not None
    if run.hurry:
        return
    run.dispatcher.stop.clear()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(run.dispatcher.stop.wait(), timeout=seconds)
