"""The C send-time writer (`loadgen.transport._kread.Sender`, see its comment in _kread.c): requests
written at their due times from a thread without the GIL, each post's ticket saying how it went, a
doorbell for the ones the loop must finish, and no write on a retired descriptor."""

from __future__ import annotations

import asyncio
import json
import os
import select
import socket
import time
from pathlib import Path

import pytest

from loadgen.config import RunConfig
from loadgen.run.runner import run_benchmark
from loadgen.transport.dispatch import PreciseWaker
from tests.conftest import GOLDEN_VLLM
from tests.loadgen_servers import golden_replay_app, serve

_kread = pytest.importorskip("loadgen.transport._kread", reason="the C module is not built here")

WRITTEN, PARTIAL, FAILED, DROPPED = 1, 2, 3, 4
MS = 1_000_000


def _pair() -> tuple[socket.socket, socket.socket]:
    a, b = socket.socketpair()
    a.setblocking(False)
    b.setblocking(False)
    return a, b


def _wait_served(sender: object, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while sender.pending():  # type: ignore[attr-defined]
        assert time.monotonic() < deadline, "the writer did not serve its posts"
        time.sleep(0.002)


def _read_all(sock: socket.socket) -> bytes:
    out = b""
    while select.select([sock], [], [], 0.2)[0]:
        got = sock.recv(1 << 20)
        if not got:
            break
        out += got
    return out


def test_posts_are_written_in_due_order_at_their_due_times() -> None:
    ours, peer = _pair()
    sender = _kread.Sender()
    try:
        now = time.perf_counter_ns()
        tickets = {}
        for name, delay in (("late", 40), ("early", 10), ("middle", 25), ("now", 0)):
            tickets[name] = _kread.Ticket(name)
            sender.post(now + delay * MS, ours.fileno(), name.encode() + b";", tickets[name])
        _wait_served(sender)
        assert _read_all(peer) == b"now;early;middle;late;"
        for name, delay in (("late", 40), ("early", 10), ("middle", 25)):
            t = tickets[name]
            assert t.state == WRITTEN
            assert t.written == len(name) + 1
            assert now + delay * MS <= t.sent_ns < now + (delay + 100) * MS  # not before, soon after
        assert sender.collect() == []  # every one written whole: none needs the loop
    finally:
        sender.close()
        ours.close()
        peer.close()


def test_a_full_socket_leaves_the_rest_and_a_closed_one_fails_and_both_ring() -> None:
    bell_r, bell_w = os.pipe()
    os.set_blocking(bell_w, False)
    ours, peer = _pair()
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    closed, gone = _pair()
    closed.shutdown(socket.SHUT_WR)  # a write now fails with EPIPE
    sender = _kread.Sender(bell_w)
    try:
        big = b"x" * (4 << 20)
        partial, failed = _kread.Ticket("partial"), _kread.Ticket("failed")
        sender.post(time.perf_counter_ns(), ours.fileno(), big, partial)
        sender.post(time.perf_counter_ns(), closed.fileno(), b"hello", failed)
        _wait_served(sender)
        assert select.select([bell_r], [], [], 2)[0], "the doorbell did not ring"
        assert partial.state == PARTIAL
        assert 0 < partial.written < len(big)
        assert failed.state == FAILED
        assert os.strerror(failed.err) == os.strerror(32)  # EPIPE, without a SIGPIPE
        assert sorted(t.owner for t in sender.collect()) == ["failed", "partial"]
        assert sender.collect() == []
    finally:
        sender.close()
        for s in (ours, peer, closed, gone):
            s.close()
        os.close(bell_r)
        os.close(bell_w)


def test_a_retired_descriptor_is_never_written_and_close_serves_what_is_left() -> None:
    ours, peer = _pair()
    sender = _kread.Sender()
    try:
        dropped, kept = _kread.Ticket("dropped"), _kread.Ticket("kept")
        now = time.perf_counter_ns()
        sender.post(now + 30 * MS, ours.fileno(), b"never", dropped)
        other, other_peer = _pair()
        sender.post(now + 60 * MS, other.fileno(), b"later", kept)
        sender.retire(ours.fileno())
        sender.close()  # returns once both are served (the second at its due time)
        assert time.perf_counter_ns() >= now + 60 * MS
        assert dropped.state == DROPPED
        assert dropped.sent_ns == 0
        assert kept.state == WRITTEN
        assert _read_all(peer) == b""
        assert _read_all(other_peer) == b"later"
        assert [t.owner for t in sender.collect()] == ["dropped"]
        with pytest.raises(RuntimeError):
            sender.post(now, ours.fileno(), b"x", _kread.Ticket())
        other.close()
        other_peer.close()
    finally:
        sender.close()
        ours.close()
        peer.close()


async def test_the_waker_hands_unfinished_tickets_to_their_owners_in_the_loop() -> None:
    loop = asyncio.get_running_loop()
    waker = PreciseWaker(loop)
    closed, gone = _pair()
    closed.shutdown(socket.SHUT_WR)
    told = loop.create_future()
    try:
        ticket = waker.post_write(time.perf_counter_ns() + 5 * MS, closed.fileno(), b"x", told.set_result)
        assert ticket is not None
        assert await asyncio.wait_for(told, 5) is ticket
        assert ticket.state == FAILED
    finally:
        waker.close()
        closed.close()
        gone.close()
    assert waker.post_write(time.perf_counter_ns(), 0, b"x", print) is None  # closed: use post_at


# A child process starts a Sender and says how its thread got the core and the slice /proc shows for
# it (Linux prints `se.slice` in /proc/<pid>/task/<tid>/sched).
_PRIORITY_CHILD = """
import os, time
from loadgen.transport import _kread
r, w = os.pipe()
sender = _kread.Sender(w)
deadline = time.monotonic() + 10
while not _kread.priority() and time.monotonic() < deadline:
    time.sleep(0.01)
slices = {}
for tid in os.listdir(f"/proc/{os.getpid()}/task"):
    for line in open(f"/proc/{os.getpid()}/task/{tid}/sched"):
        if line.startswith("se.slice"):
            slices[int(tid)] = int(line.split(":")[1])
main = os.getpid()
print(_kread.priority(), slices.get(main, -1), min((v for k, v in slices.items() if k != main), default=-1),
      int(open(f"/proc/{main}/timerslack_ns").read()), _kread.timer_slack())
sender.close()
"""


def _kernel_at_least(major: int, minor: int) -> bool:
    try:
        got = tuple(int(x) for x in os.uname().release.split("-")[0].split(".")[:2])
    except ValueError:
        return False
    return got >= (major, minor)


def _child_priority(drop_nice: bool) -> tuple[str, int, int, int, int]:
    import shutil
    import subprocess
    import sys

    cmd = [sys.executable, "-c", _PRIORITY_CHILD]
    if drop_nice:  # as an unprivileged user, or a container without CAP_SYS_NICE (the H200 host)
        cmd = ["setpriv", "--inh-caps=-sys_nice", "--bounding-set=-sys_nice", *cmd]
        if shutil.which("setpriv") is None:
            pytest.skip("setpriv (util-linux) is not installed")
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=True).stdout.split()
    return out[0], int(out[1]), int(out[2]), int(out[3]), int(out[4])


@pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="Linux only")
def test_without_real_time_priority_the_writer_takes_eevdfs_shortest_slice() -> None:
    """Refused SCHED_FIFO, the writer thread asks for a 0.1 ms slice (sched_attr.sched_runtime, no
    privilege needed): on Linux 6.12+ a due send then preempts the event-loop thread sharing its core
    instead of waiting out the loop's slice. The loop's own thread keeps the default slice."""
    if os.geteuid() != 0 and not _kernel_at_least(6, 12):
        pytest.skip("no short slices before Linux 6.12")
    how, main_slice, writer_slice, main_slack, writer_slack = _child_priority(drop_nice=os.geteuid() == 0)
    assert writer_slack == 1  # its timed waits end at the due time, not up to the timer slack later
    assert main_slack != 1  # the event loop's thread keeps its own
    if not _kernel_at_least(6, 12):
        assert how in ("short-slice", "none")  # older kernels take the field and ignore it
        return
    assert how == "short-slice"
    assert writer_slice == 100_000
    assert main_slice != 100_000


@pytest.mark.skipif(not os.path.exists("/proc/self/task"), reason="Linux only")
def test_precise_timers_takes_the_calling_threads_timer_slack_to_one_ns() -> None:
    """What a send-time thread calls as it starts (the C writer in prefer_cpu, the Python waker in
    dispatch._prefer_cpu): its own timer slack only, not the process's other threads'."""
    import threading

    from loadgen.transport import kernel_stamps

    def slack_of(tid: int) -> int:
        return int(Path(f"/proc/{tid}/timerslack_ns").read_text())  # a thread's own, by its id

    if not Path(f"/proc/{threading.get_native_id()}/timerslack_ns").exists():
        pytest.skip("no timerslack_ns in /proc before Linux 4.6")
    main_before = slack_of(threading.get_native_id())
    got: list[tuple[bool, int]] = []

    def body() -> None:
        got.append((kernel_stamps.precise_timers(), slack_of(threading.get_native_id())))

    thread = threading.Thread(target=body)
    thread.start()
    thread.join()
    assert got == [(True, 1)]
    assert slack_of(threading.get_native_id()) == main_before


@pytest.mark.skipif(os.geteuid() != 0, reason="real-time priority needs root or CAP_SYS_NICE")
def test_where_permitted_the_writer_runs_at_real_time_priority() -> None:
    how, _, _, _, writer_slack = _child_priority(drop_nice=False)
    assert how == "realtime"
    assert writer_slack in (0, 1)  # set to 1 ns; Linux 6.x shows 0 for a real-time thread, which has none


async def test_an_open_loop_run_records_how_its_writer_got_the_core(tmp_path: Path) -> None:
    app = golden_replay_app(GOLDEN_VLLM / "sse_completions.txt", {"object": "list", "data": [{"id": "m"}]})
    async with serve(app) as url:
        config = RunConfig(
            target="openai",
            base_url=url,
            endpoint="completions",
            num_prompts=4,
            rate=200.0,
            metrics_port=0,
            linger_s=0,
            results_dir=str(tmp_path),
            output_len="fixed:24",
        )
        result = await run_benchmark(config, progress=False)
    assert result.summary["requests"]["ok"] == 4
    manifest = json.loads((result.result_dir / "manifest.json").read_text())
    assert manifest["client"]["send_priority"] == _kread.priority()
    assert manifest["client"]["send_priority"] in ("realtime", "short-slice", "none")
