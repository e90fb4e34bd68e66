"""The step loop: one asyncio task runs the scheduler in real time and delivers each step's tokens.

Each step starts when the previous one ends on the model's clock (back to back while there is work),
lasts `StepModel.step_seconds(...) / time_scale`, and its tokens are delivered in one pass over the
sequences that produced them. The gap between the modelled end of a step and the moment its tokens
were handed to the sockets is recorded (`step_lateness_ns`): it is the simulator's own timing error.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from typing import Protocol

from simengine.config import SimConfig
from simengine.request import RequestGroup, Sequence
from simengine.scheduler import Batch, Scheduler, StepOutcome
from simengine.virtual import build_scheduler

perf_ns = time.perf_counter_ns
BACK_TO_BACK_NS = 2_000_000  # a step that starts within 2 ms of the previous end continues its clock
# epoll waits in whole milliseconds (rounded up): the loop timer sleeps to within this much of a step's
# end and a precise blocking sleep (clock_nanosleep, no CPU burnt, GIL released) covers the rest, so
# steps end on time rather than up to 1 ms late.
FINE_SLEEP_NS = 1_100_000


class MetricsRecorder(Protocol):
    """A personality's metrics: fed by the step loop, rendered by `/metrics`."""

    def on_step(self, step_tokens: int) -> None: ...

    def on_first_token(self, seq: Sequence) -> None: ...

    def on_gaps(self, gaps: dict[int, int]) -> None: ...

    def on_finished(self, group: RequestGroup) -> None: ...

    def render(self, sched: Scheduler) -> bytes: ...


class Engine:
    """Owns the scheduler and the step-loop task of one simulated engine."""

    def __init__(self, cfg: SimConfig, metrics: MetricsRecorder) -> None:
        self.cfg = cfg
        self.scheduler = build_scheduler(cfg)
        self.metrics = metrics
        self.time_scale = cfg.time_scale
        self.step_lateness_ns: deque[int] = deque(maxlen=200_000)
        self.step_model_ns: deque[int] = deque(maxlen=200_000)
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._to_abort: list[RequestGroup] = []
        self.in_flight = 0

    async def start(self) -> None:
        self._wake = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._run(), name="simengine-step-loop")

    async def stop(self) -> None:
        """Stop stepping and end every unfinished request (their connections are closed)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        sched = self.scheduler
        groups = {id(s.group): s.group for s in (*sched.running, *sched.waiting)}
        for group in groups.values():
            sched.abort(group)
            if group.sink is not None:
                group.sink.on_aborted()

    def submit(self, group: RequestGroup) -> None:
        """Queue a request; its sink receives the tokens."""
        self.in_flight += 1
        self.scheduler.add(group)
        self._wake.set()

    def abort(self, group: RequestGroup) -> None:
        """The client went away: stop generating for it (deferred to the end of the current pass)."""
        if not group.aborted:
            group.aborted = True
            self._to_abort.append(group)
            self._wake.set()

    def _flush_aborts(self) -> None:
        while self._to_abort:
            group = self._to_abort.pop()
            self.scheduler.abort(group)
            self.metrics.on_finished(group)
            self.in_flight -= 1
            if group.sink is not None:
                group.sink.on_aborted()

    async def _run(self) -> None:
        prev_end = 0
        while True:
            self._flush_aborts()
            if not self.scheduler.has_work():
                self._wake.clear()
                await self._wake.wait()
                continue
            now = perf_ns()
            batch = self.scheduler.schedule(now)
            if batch is None:
                if not self._reject_unschedulable():  # nothing to drop: wait for news, briefly
                    self._wake.clear()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._wake.wait(), 0.01)
                continue
            start = prev_end if 0 <= now - prev_end < BACK_TO_BACK_NS else now
            dur = int(batch.duration_s * 1e9 / self.time_scale)
            end = start + dur
            await _sleep_until(end)
            t = perf_ns()
            self.step_lateness_ns.append(t - end)
            self.step_model_ns.append(dur)
            self._deliver(batch, self.scheduler.complete(batch, t), t)
            prev_end = end

    def _reject_unschedulable(self) -> bool:
        """Nothing runs and the head of the queue cannot be admitted (too big for the cache): drop it."""
        sched = self.scheduler
        if sched.running or not sched.waiting:
            return False
        group = sched.waiting[0].group
        for seq in group.seqs:
            seq.finish_reason = "error"
        self.abort(group)
        self._flush_aborts()
        return True

    def _deliver(self, batch: Batch, out: StepOutcome, now_ns: int) -> None:
        for seq in out.emitted:
            sink = seq.group.sink
            if sink is not None and not seq.group.aborted:
                sink.on_tokens(seq, now_ns)
        record_step(self.metrics, batch, out.emitted)
        for group in out.finished_groups:
            if group.aborted:
                continue
            self.metrics.on_finished(group)
            self.in_flight -= 1
            if group.sink is not None:
                group.sink.on_group_done(group, now_ns)


def record_step(metrics: MetricsRecorder, batch: Batch, emitted: list[Sequence]) -> None:
    """Feed one step to the metrics: first tokens (TTFT), inter-token gaps, the step's token count."""
    gaps: dict[int, int] = {}
    for seq in emitted:
        if seq.generated == 1:
            metrics.on_first_token(seq)
        else:
            gap = seq.last_token_ns - seq.prev_token_ns
            gaps[gap] = gaps.get(gap, 0) + 1
    metrics.on_gaps(gaps)
    metrics.on_step(batch.new_tokens)


async def _sleep_until(deadline_ns: int) -> None:
    """Sleep until `deadline_ns` (perf_counter), yielding to the event loop at least once."""
    delay = deadline_ns - perf_ns()
    if delay > FINE_SLEEP_NS:
        await asyncio.sleep((delay - FINE_SLEEP_NS) / 1e9)
    else:
        await asyncio.sleep(0)  # let request handlers run between steps even when steps run late
    remaining = deadline_ns - perf_ns()
    if remaining > 0:
        time.sleep(remaining / 1e9)  # noqa: ASYNC251 - sub-millisecond, deliberate (see FINE_SLEEP_NS)
