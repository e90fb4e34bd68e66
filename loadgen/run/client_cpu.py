"""What the run cost loadgen itself: `client_cpu` in summary.json.

loadgen's promise is that it is never the bottleneck it measures (docs/client-cost.md), and a run says
what it spent keeping it: the process's CPU over the load (every thread: the event loop, the C writer,
the send-time waker), from the start of dispatch (the opening connections included) to the end of the
last request, per request and as cores kept busy over that stretch; and the CPU from the process's start
to the summary (the interpreter's start-up, imports and preflight included, the record's writing not).
The embedded simulated engine (`--target sim`) runs in a thread of this process: its thread's CPU is
left out of these figures and given beside them (`embedded_engine_s`, over the load).
A load that takes most of a core (`load_cores` near 1 on a client with one core for its event loop) is
one where the client, not the engine, may have set the pace; `client_saturated` says when it did.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

# CPU clocks (ns) of code that runs in this process and is not loadgen's: the embedded simulated
# engine's thread (`--target sim`). Their CPU is taken out of the figures and reported beside them.
_NOT_OURS: list[Callable[[], int]] = []


@contextlib.contextmanager
def not_ours(cpu_ns: Callable[[], int]) -> Iterator[None]:
    """While active, the CPU `cpu_ns()` counts is not loadgen's (an engine served from this process)."""
    _NOT_OURS.append(cpu_ns)
    try:
        yield
    finally:
        _NOT_OURS.remove(cpu_ns)


def _not_ours_ns() -> int:
    return sum(clock() for clock in _NOT_OURS)


class ClientCpu:
    """CPU (CLOCK_PROCESS_CPUTIME_ID: every thread) and wall time at the load's start and end, and the
    CPU of what runs here and is not loadgen's (`not_ours`), to take out."""

    def __init__(self) -> None:
        self._start: tuple[int, int, int] | None = None  # (perf_counter_ns, process_time_ns, not ours)
        self._end: tuple[int, int, int] | None = None

    @staticmethod
    def _now() -> tuple[int, int, int]:
        return time.perf_counter_ns(), time.process_time_ns(), _not_ours_ns()

    def start(self) -> None:
        """The load starts (once: a second call keeps the first)."""
        if self._start is None:
            self._start = self._now()

    def stop(self) -> None:
        """The load is over (once; nothing before a start)."""
        if self._start is not None and self._end is None:
            self._end = self._now()

    def report(self, requests: int) -> dict[str, Any] | None:
        """`client_cpu`: None when no load started (a run that stopped before its first send)."""
        if self._start is None:
            return None
        self.stop()
        assert self._end is not None
        wall_ns = self._end[0] - self._start[0]
        theirs_ns = self._end[2] - self._start[2]
        cpu_ns = self._end[1] - self._start[1] - theirs_ns
        out = {
            "load_s": round(cpu_ns / 1e9, 6),
            "load_ms_per_request": round(cpu_ns / 1e6 / requests, 6) if requests else None,
            "load_cores": round(cpu_ns / wall_ns, 4) if wall_ns > 0 else None,
            "total_s": round((time.process_time_ns() - _not_ours_ns()) / 1e9, 6),
            "requests": requests,
        }
        if _NOT_OURS:  # an engine served from this process: its CPU over the load, left out above
            out["embedded_engine_s"] = round(theirs_ns / 1e9, 6)
        return out
