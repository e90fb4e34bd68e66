"""What the run cost loadgen itself: `client_cpu` in summary.json.

loadgen's promise is that it is never the bottleneck it measures (docs/client-cost.md), and a run says
what it spent keeping it: the process's CPU over the load (every thread: the event loop, the C writer,
the send-time waker), from the start of dispatch (the opening connections included) to the end of the
last request, per request and as cores kept busy over that stretch; and the CPU from the process's start
to the summary (the interpreter's start-up, imports and preflight included, the record's writing not).
A load that takes most of a core (`load_cores` near 1 on a client with one core for its event loop) is
one where the client, not the engine, may have set the pace; `client_saturated` says when it did.
"""

from __future__ import annotations

import time
from typing import Any


class ClientCpu:
    """CPU (CLOCK_PROCESS_CPUTIME_ID: every thread) and wall time at the load's start and end."""

    def __init__(self) -> None:
        self._start: tuple[int, int] | None = None  # (perf_counter_ns, process_time_ns)
        self._end: tuple[int, int] | None = None

    def start(self) -> None:
        """The load starts (once: a second call keeps the first)."""
        if self._start is None:
            self._start = (time.perf_counter_ns(), time.process_time_ns())

    def stop(self) -> None:
        """The load is over (once; nothing before a start)."""
        if self._start is not None and self._end is None:
            self._end = (time.perf_counter_ns(), time.process_time_ns())

    def report(self, requests: int) -> dict[str, Any] | None:
        """`client_cpu`: None when no load started (a run that stopped before its first send)."""
        if self._start is None:
            return None
        self.stop()
        assert self._end is not None
        wall_ns, cpu_ns = self._end[0] - self._start[0], self._end[1] - self._start[1]
        return {
            "load_s": round(cpu_ns / 1e9, 6),
            "load_ms_per_request": round(cpu_ns / 1e6 / requests, 6) if requests else None,
            "load_cores": round(cpu_ns / wall_ns, 4) if wall_ns > 0 else None,
            "total_s": round(time.process_time_ns() / 1e9, 6),
            "requests": requests,
        }
