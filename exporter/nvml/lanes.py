"""Time-bounded NVML calls: one daemon thread ("lane") per GPU, so a call that hangs stalls only its GPU.

A caller submits a job to a lane and waits at most a deadline; a job still running past it is left to
finish in its lane (its result is used by a later caller) and the caller serves what it had before.
Jobs are keyed by (lane, kind): while a job of that kind is pending, submitting again returns it, so
a hung GPU never builds a queue of reads behind the hung call.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Hashable, Mapping
from typing import Any

LOG = logging.getLogger(__name__)
SYSTEM = "system"  # lane for calls about no GPU in particular (count, driver version)
EVENTS = "events"  # lane for the XID event set
TOPOLOGY = "topology"  # lane for GPU-pair calls


class CallTimeout(TimeoutError):
    """An NVML call did not answer within its deadline (it keeps running in its lane)."""


class Job:
    """One call on a lane: its result or error, and when it was submitted and finished."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn
        self.done = threading.Event()
        self.value: Any = None
        self.error: BaseException | None = None
        self.submitted = time.monotonic()
        self.finished: float | None = None
        self.waited_out = False  # a caller already gave up on it: later callers do not wait again

    def run(self) -> None:
        """Run the call in the lane's thread; never raises."""
        try:
            self.value = self.fn()
        except Exception as exc:  # handed to the waiter
            self.error = exc
        finally:
            self.finished = time.monotonic()
            self.done.set()

    @property
    def latency_s(self) -> float | None:
        """Seconds from submission to answer (queueing included); None while pending."""
        return None if self.finished is None else self.finished - self.submitted


class Lanes:
    """Daemon threads keyed by GPU index (or SYSTEM / EVENTS / TOPOLOGY), created on first use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queues: dict[Hashable, queue.SimpleQueue[Job | None]] = {}
        self._jobs: dict[tuple[Hashable, str], Job] = {}

    def _queue(self, lane: Hashable) -> queue.SimpleQueue[Job | None]:
        if lane not in self._queues:
            jobs: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
            self._queues[lane] = jobs
            threading.Thread(target=_serve, args=(jobs,), name=f"nvml-lane-{lane}", daemon=True).start()
        return self._queues[lane]

    def submit(self, lane: Hashable, kind: str, fn: Callable[[], Any]) -> tuple[Job, Job | None]:
        """(job, previous job of this kind): the pending job when one is pending, else a new one."""
        with self._lock:
            previous = self._jobs.get((lane, kind))
            if previous is not None and not previous.done.is_set():
                return previous, previous
            job = Job(fn)
            self._jobs[(lane, kind)] = job
            self._queue(lane).put(job)
            return job, previous

    def call(self, lane: Hashable, kind: str, fn: Callable[[], Any], timeout_s: float) -> Any:
        """fn()'s result within timeout_s, its exception, or CallTimeout (at once when an earlier
        caller already waited this pending job out)."""
        job, _ = self.submit(lane, kind, fn)
        if not job.done.wait(0.0 if job.waited_out else timeout_s):
            job.waited_out = True
            raise CallTimeout(f"NVML {kind} on {lane}: no answer within {timeout_s:g} s")
        if job.error is not None:
            raise job.error
        return job.value

    def gather(self, kind: str, calls: Mapping[int, Callable[[], Any]], timeout_s: float) -> dict[int, Job]:
        """Run one call per lane at once and wait for them under one shared deadline.

        A lane whose previous call of this kind is still pending, or answered later than the
        deadline, is not waited for: its job runs on, and the caller sees it pending (not done).
        """
        deadline = time.monotonic() + timeout_s
        jobs: dict[int, Job] = {}
        waited: list[Job] = []
        for lane, fn in calls.items():
            job, previous = self.submit(lane, kind, fn)
            jobs[lane] = job
            prompt = previous is None or (previous.latency_s is not None and previous.latency_s <= timeout_s)
            if job is not previous and prompt:
                waited.append(job)
        for job in waited:
            job.done.wait(max(0.0, deadline - time.monotonic()))
        return jobs

    def close(self) -> None:
        """Let idle lanes' threads end (a lane inside a hung call ends when the call returns)."""
        with self._lock:
            for jobs in self._queues.values():
                jobs.put(None)
            self._queues.clear()


def _serve(jobs: queue.SimpleQueue[Job | None]) -> None:
    while (job := jobs.get()) is not None:
        job.run()
