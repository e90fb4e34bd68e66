"""The send-time waker thread: actions run at their deadlines, in time order, stamped after."""

from __future__ import annotations

import asyncio
import time

from loadgen.dispatch import PreciseWaker


async def test_run_at_runs_in_deadline_order_and_stamps_after_the_action() -> None:
    waker = PreciseWaker(asyncio.get_running_loop())
    ran: list[tuple[str, int]] = []
    try:
        now = time.perf_counter_ns()
        late = waker.run_at(now + 30_000_000, lambda: ran.append(("late", time.perf_counter_ns())) or 1)
        early = waker.run_at(now + 10_000_000, lambda: ran.append(("early", time.perf_counter_ns())) or 2)
        (early_ns, early_result), (late_ns, late_result) = await asyncio.wait_for(
            asyncio.gather(early, late), timeout=5
        )
    finally:
        waker.close()
    assert [name for name, _ in ran] == ["early", "late"]  # queued second, due first
    assert (early_result, late_result) == (2, 1)
    assert ran[0][1] >= now + 10_000_000
    assert ran[1][1] >= now + 30_000_000
    assert early_ns >= ran[0][1]
    assert late_ns >= ran[1][1]


async def test_run_at_reports_the_action_error_to_the_loop() -> None:
    waker = PreciseWaker(asyncio.get_running_loop())

    def fail() -> int:
        raise ConnectionResetError("closed before the send")

    try:
        _, result = await asyncio.wait_for(waker.run_at(time.perf_counter_ns(), fail), timeout=5)
    finally:
        waker.close()
    assert isinstance(result, ConnectionResetError)
