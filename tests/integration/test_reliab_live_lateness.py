"""Issue 22 item 15: live lateness is recorded when a request is sent, so the live
`loadgen_schedule_lag_seconds` moves while requests are in flight; Ctrl-C with many requests in
flight against a slow engine stops in bounded time, and the event loop is never held for the whole
cancellation at once."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from loadgen.records import RequestRecord
from loadgen.transport.dispatch import CANCEL_BATCH, Dispatcher
from tests.integration.test_loadgen_shards import scrape
from tests.loadgen_servers import FakeEngine, ServerThread, free_port

pytestmark = pytest.mark.timeout(180)
IN_FLIGHT = 2000
# measured here: 3.3-6.1 s from SIGINT to exit with 12,000 streams in flight (about 0.3 ms a request,
# record writing included); the bound allows a 5x slower, busy host: 10 s + 1.5 ms a request
STOP_BOUND_S = 10.0 + 0.0015 * IN_FLIGHT


def _sample(seen: dict[str, float], name: str) -> float:
    return sum(v for k, v in seen.items() if k.startswith(name + "{"))


def test_schedule_lag_is_recorded_at_send_while_requests_are_in_flight(tmp_path: Path) -> None:
    engine = FakeEngine(ttft_s=30.0)  # nothing finishes while we look
    port = free_port()
    with ServerThread(engine.app) as server:
        cmd = [
            *(sys.executable, "-m", "loadgen.cli.main", "run", "--target", "openai"),
            *("--base-url", server.base_url, "--num-prompts", "40", "--rate", "40", "--warmup", "0"),
            *("--metrics-port", str(port), "--metrics-listen-address", "127.0.0.1", "--linger", "0"),
            *("--results-dir", str(tmp_path), "--quiet", "--request-timeout", "60"),
        ]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline, seen = time.monotonic() + 60, {}
            while time.monotonic() < deadline:
                seen = scrape(port)
                if _sample(seen, "loadgen_schedule_lag_seconds_count") >= 40:
                    break
                time.sleep(0.2)
        finally:
            proc.send_signal(signal.SIGINT)
            proc.communicate(timeout=60)
    assert _sample(seen, "loadgen_schedule_lag_seconds_count") == 40
    assert _sample(seen, "loadgen_slot_wait_seconds_count") == 40
    assert _sample(seen, "loadgen_requests_total") == 0  # none finished: lateness came at send
    assert _sample(seen, "loadgen_in_flight_requests") > 0


@pytest.fixture
def slow_engine() -> Iterator[str]:
    """A simulated engine in its own process whose streams stall mid-way for 10 minutes."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    cmd = [sys.executable, "-m", "simengine", "--host", "127.0.0.1", "--port", str(port)]
    proc = subprocess.Popen([*cmd, "--fault-stall-ms", "600000"], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        proc.stdout.readline()  # "... listening on ..."
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.kill()
        proc.wait(30)


def test_ctrl_c_with_many_requests_in_flight_stops_in_bounded_time(slow_engine: str, tmp_path: Path) -> None:
    port = free_port()
    cmd = [
        *(sys.executable, "-m", "loadgen.cli.main", "run", "--target", "openai", "--base-url", slow_engine),
        *("--num-prompts", str(IN_FLIGHT), "--rate", "1000", "--profile", "short", "--warmup", "0"),
        *("--metrics-port", str(port), "--metrics-listen-address", "127.0.0.1", "--linger", "0"),
        *("--results-dir", str(tmp_path), "--quiet", "--json", "--request-timeout", "600"),
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if _sample(scrape(port), "loadgen_in_flight_requests") >= IN_FLIGHT:
                break
            time.sleep(0.25)
        stopped = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
        took = time.monotonic() - stopped
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, err
    summary = json.loads(out)
    assert summary["requests"]["by_outcome"]["cancelled"] == IN_FLIGHT
    assert took < STOP_BOUND_S, f"{took:.1f} s from SIGINT to exit with {IN_FLIGHT} in flight"


async def test_cancelling_many_in_flight_yields_to_the_loop_between_batches() -> None:
    """The stop's cancellation runs CANCEL_BATCH requests per loop step, not all in one."""
    done: list[RequestRecord] = []
    dispatcher = Dispatcher(None, str, None, None, done.append)
    n = 5 * CANCEL_BATCH

    async def forever(record: RequestRecord) -> RequestRecord:
        await asyncio.sleep(3600)
        return record

    for i in range(n):
        record = RequestRecord(i, f"r{i}", False, 0, 1, 1)
        task = asyncio.get_running_loop().create_task(forever(record))
        dispatcher.by_task[task] = record
        dispatcher.in_flight.add(task)
        dispatcher.active += 1
        task.add_done_callback(dispatcher._finished)
    await asyncio.sleep(0)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    beat = asyncio.create_task(ticker())
    await dispatcher.drain(cancel=True)
    beat.cancel()
    dispatcher.waker.close()
    assert len(done) == n
    assert ticks >= n // CANCEL_BATCH - 1  # the loop ran other work between the batches
