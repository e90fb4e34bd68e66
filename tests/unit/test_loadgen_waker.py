"""The send-time waker thread: actions run at their deadlines, in time order, whatever the post order."""

from __future__ import annotations

import asyncio
import threading
import time

from loadgen.transport.dispatch import PreciseWaker


def _recorder(ran: list[tuple[str, int]], done: threading.Event, name: str, last: bool = False):
    def action() -> None:
        ran.append((name, time.perf_counter_ns()))
        if last:
            done.set()

    return action


async def test_post_at_runs_in_deadline_order_not_post_order() -> None:
    waker = PreciseWaker(asyncio.get_running_loop())
    ran: list[tuple[str, int]] = []
    done = threading.Event()
    try:
        now = time.perf_counter_ns()
        waker.post_at(now + 30_000_000, _recorder(ran, done, "late", last=True))
        waker.post_at(now + 10_000_000, _recorder(ran, done, "early"))  # posted second, due first
        waker.post_at(now + 20_000_000, _recorder(ran, done, "middle"))
        assert await asyncio.to_thread(done.wait, 5)
    finally:
        waker.close()
    assert [name for name, _ in ran] == ["early", "middle", "late"]
    for (_, at), due_ms in zip(ran, (10, 20, 30), strict=True):
        assert at >= now + due_ms * 1_000_000


async def test_a_failing_action_does_not_stop_the_thread() -> None:
    waker = PreciseWaker(asyncio.get_running_loop())
    ran: list[tuple[str, int]] = []
    done = threading.Event()

    def fail() -> None:
        raise ConnectionResetError("closed before the send")

    try:
        now = time.perf_counter_ns()
        waker.post_at(now, fail)
        waker.post_at(now + 5_000_000, _recorder(ran, done, "after", last=True))
        assert await asyncio.to_thread(done.wait, 5)
    finally:
        waker.close()
    assert [name for name, _ in ran] == ["after"]


async def test_sleep_until_returns_after_the_deadline() -> None:
    waker = PreciseWaker(asyncio.get_running_loop())
    try:
        due = time.perf_counter_ns() + 15_000_000
        await asyncio.wait_for(waker.sleep_until(due), timeout=5)
        assert time.perf_counter_ns() >= due
    finally:
        waker.close()


async def test_close_still_serves_what_was_posted() -> None:
    waker = PreciseWaker(asyncio.get_running_loop())
    ran: list[tuple[str, int]] = []
    done = threading.Event()
    waker.post_at(time.perf_counter_ns() + 10_000_000, _recorder(ran, done, "posted", last=True))
    waker.close()
    assert await asyncio.to_thread(done.wait, 5)
    await asyncio.to_thread(waker._thread.join, 5)
    assert not waker._thread.is_alive()
    assert [name for name, _ in ran] == ["posted"]
