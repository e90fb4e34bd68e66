"""The C send-time writer (`loadgen.transport._kread.Sender`, see its comment in _kread.c): requests
written at their due times from a thread without the GIL, each post's ticket saying how it went, a
doorbell for the ones the loop must finish, and no write on a retired descriptor."""

from __future__ import annotations

import asyncio
import os
import select
import socket
import time

import pytest

from loadgen.transport.dispatch import PreciseWaker

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
