"""Kernel receive timestamps for the raw client's reads (Linux `SO_TIMESTAMPNS`).

Linux stamps each TCP segment as it is received. With `SO_TIMESTAMPNS` set on a socket, a `recvmsg`
returns the stamp of the last segment it consumed as an `SCM_TIMESTAMPNS` control message
(CLOCK_REALTIME). `KernelReader` reads a connection's socket itself for that: the transport's own
reading is paused and loadgen's reader (`loop.add_reader` on a duplicate descriptor of the same socket)
`recvmsg`s each read and hands it to the connection with the kernel's time mapped to `perf_counter_ns`
(by the offset `time_ns() - perf_counter_ns()`, see `_resample`). A busy event loop then delays a
read's handling, never its stamp.

Only the reading moves: at end of file the transport's reading is resumed so the transport sees the
close itself (keep-alive, `connection_lost` as before); a read error is handed to the connection, which
closes the transport with it. A read without the control message is stamped as today's reads are
(`rawhttp.read_stamp`), and where the option does not exist (not Linux, TLS) the transport reads as
before. `counts()` says what a run used (the manifest's `client.arrival_stamps`).

Where the C extension `loadgen.transport._kread` is built (pyproject's ext-modules; optional), its
`Reader` is the loop's reader callback instead of `_readable`: the same read, stamp and hand-off
without the interpreter, and while the connection is between chunks of a chunked body (`sink`) a read
that is exactly one whole chunk is recorded in C, as `ChunkedBody.feed`'s fast path would record it.
`LOADGEN_NATIVE=0` in the environment keeps the Python reader (`native_reads()` says whether a run
used the C one: the manifest's `client.native_reads`), and the Python waker thread for sends: the
module's `Sender` writes requests at their send times from a thread of its own
(`dispatch.PreciseWaker.post_write`).
"""

from __future__ import annotations

import asyncio
import os
import socket
import struct
import sys
import time
from collections.abc import Callable
from typing import Any

from loadgen.transport.sse import COMPACT_TOKEN

Sender: Any = None  # the C send-time writer and its tickets (dispatch.PreciseWaker.post_write)
Ticket: Any = None
parse_head: Any = None  # the C parse of a usual response head (rawhttp._Conn._head); None: in Python
# a ticket's states that need the loop (rawhttp._Conn.attend): not written whole, failed, dropped
TICKET_PARTIAL = TICKET_FAILED = TICKET_DROPPED = -1
try:
    from loadgen.transport import _kread  # type: ignore[attr-defined]
except ImportError:  # not built (no compiler at install, another platform): the Python reader
    _kread = None
else:
    _kread.set_token(COMPACT_TOKEN)
    Sender, Ticket = _kread.Sender, _kread.Ticket
    if os.environ.get("LOADGEN_NATIVE", "1") != "0":
        parse_head = _kread.head
    TICKET_PARTIAL, TICKET_FAILED, TICKET_DROPPED = (
        _kread.TICKET_PARTIAL,
        _kread.TICKET_FAILED,
        _kread.TICKET_DROPPED,
    )

# Python's socket module does not name SO_TIMESTAMPNS(_OLD): 35 in Linux's asm-generic (x86, arm, riscv,
# powerpc, s390); alpha, mips, parisc and sparc number their own, so they read as before
_GENERIC = sys.platform == "linux" and not os.uname().machine.startswith(("alpha", "mips", "parisc", "sparc"))
SO_TIMESTAMPNS: int | None = getattr(socket, "SO_TIMESTAMPNS", 35 if _GENERIC else None)
BUF = 65536  # most bytes one read takes; under glibc's mmap threshold (128 KiB), so not mmapped per call
_CMSG = socket.CMSG_SPACE(16)  # one struct timespec
_timespec = struct.Struct("@ll").unpack
_GOOD_SAMPLE_NS = 20_000  # an offset taken across a longer pause (preempted in between) is not used
RESAMPLE_NS = 1_000_000  # the offset is taken again for a stamp this far from the last sample's

_clock = [-(1 << 62), 0]  # [the kernel stamp (ns) the offset was last taken for, the offset]
# since the last reset_counts()
_counts = {"kernel_connections": 0, "native_connections": 0, "read_stamped": 0, "senders": 0}
_waker_priority = [""]  # how the Python waker thread got the core (dispatch._prefer_cpu), "" before one ran


def _resample(kernel_ns: int) -> None:
    """Take the offset CLOCK_REALTIME - perf_counter_ns (CLOCK_MONOTONIC) again, for a kernel stamp
    more than RESAMPLE_NS from the one it was last taken for. NTP slews both clocks alike, so the
    offset only changes when the clock is stepped; a step of over 1 ms moves the next read's stamp
    that far and is picked up there, so it cannot skew a run (a reading taken across a preemption
    is not used). Sampling per 1 ms of stamps instead of per read costs nothing on the read path."""
    before = time.perf_counter_ns()
    real = time.time_ns()
    after = time.perf_counter_ns()
    if after - before < _GOOD_SAMPLE_NS or _clock[0] < 0:
        _clock[1] = real - (before + after) // 2
    _clock[0] = kernel_ns


def hold_stamping() -> socket.socket | None:
    """A socket that asks for receive stamps, to hold open while connections read: Linux stamps
    received packets only while some socket on the host asks for stamps, and the first one to ask
    turns stamping on from a deferred work item, so a client whose connections are the host's only
    stamped sockets could read its first response unstamped (`arrival_stamps` then says `mixed`).
    Opened before the first connection; None where there are no kernel stamps."""
    if SO_TIMESTAMPNS is None:
        return None
    try:
        return _asking_stamps(socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
    except OSError:
        return None


def _asking_stamps(sock: socket.socket) -> socket.socket | None:
    """`sock` with SO_TIMESTAMPNS set, or None (closed) where the option is refused."""
    assert SO_TIMESTAMPNS is not None  # the callers looked
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    except OSError:
        sock.close()
        return None
    return sock


def native() -> bool:
    """True when connections read with the C reader (built, and not switched off by LOADGEN_NATIVE=0)."""
    return _kread is not None and os.environ.get("LOADGEN_NATIVE", "1") != "0"


def reset_counts() -> None:
    """Start counting a new run's connections and reads."""
    for key in _counts:
        _counts[key] = 0


def count_read_stamped() -> None:
    """A body read stamped when Python got it (no kernel stamp)."""
    _counts["read_stamped"] += 1


def counts() -> dict[str, int]:
    """Kernel-read connections and read-stamped reads since `reset_counts`."""
    return dict(_counts)


def native_reads() -> bool:
    """True when a connection since `reset_counts` read with the C reader (the manifest's
    `client.native_reads`)."""
    return _counts["native_connections"] > 0


def sender_started() -> None:
    """A run started the C writer (`Sender`)."""
    _counts["senders"] += 1


def precise_timers() -> bool:
    """Let the calling thread's timed waits end at their deadline rather than up to its timer slack later
    (50 µs by default; `_kread.c`'s precise_timers), where the C module is built; False where it is not.
    For a send-time thread (a real-time one has no slack on recent kernels; older ones kept it for futex
    waits)."""
    if _kread is None:
        return False
    try:
        _kread.precise_timers()
    except OSError:
        return False
    return True


def note_waker_priority(how: str) -> None:
    """How the Python waker thread got the core: `realtime` or `none` (dispatch._prefer_cpu)."""
    _waker_priority[0] = how


def send_priority() -> str | None:
    """How the thread that writes requests at their due time got its core (the manifest's
    `client.send_priority`): `realtime` (SCHED_FIFO, where permitted), `short-slice` (EEVDF's
    shortest slice, Linux 6.12+, no privilege needed; the C writer only) or `none`; None when no
    such thread ran. It decides how soon a due send preempts the event loop on a shared core."""
    if _counts["senders"] and _kread is not None:
        return str(_kread.priority()) or None
    return _waker_priority[0] or None


def arrival_stamps() -> str:
    """`kernel` when every read was stamped by the kernel, `read` when none was, else `mixed`."""
    if not _counts["kernel_connections"]:
        return "read"
    return "mixed" if _counts["read_stamped"] else "kernel"


# (kernel-stamped read: t, data), (read without a stamp: data), (read error)[, (the C reader recorded a
# read of data chunks that ended with exactly the last chunk, `0\r\n\r\n`, and stopped recording: t)]
_Read = Callable[[int, bytes], None]
_Plain = Callable[[bytes], None]
_Failed = Callable[[OSError], None]
Handlers = tuple[_Read, _Plain, _Failed] | tuple[_Read, _Plain, _Failed, Callable[[int], None]]


class KernelReader:
    """Reads one connection's socket with `recvmsg` and its kernel stamps (see module docstring)."""

    __slots__ = (
        "sock", "fd", "loop", "transport", "received", "plain", "failed", "reading", "recvmsg", "native",
    )  # fmt: skip

    def __init__(
        self,
        sock: socket.socket,
        loop: asyncio.AbstractEventLoop,
        transport: asyncio.Transport,
        handlers: Handlers,
    ) -> None:
        self.sock, self.fd, self.loop, self.transport = sock, sock.fileno(), loop, transport
        self.received, self.plain, self.failed = handlers[:3]
        self.reading = False
        self.recvmsg = sock.recvmsg
        ends = handlers[3:]  # the raw client's: a read that ended the body, said with its stamp
        calls = (self.received, self.plain, self.failed, self._eof, self.stop, *ends)
        self.native = _kread.Reader(self.fd, transport, *calls) if native() else None

    @classmethod
    def attach(
        cls,
        transport: asyncio.Transport,
        loop: asyncio.AbstractEventLoop,
        handlers: Handlers,
    ) -> KernelReader | None:
        """A reader for the transport's (plain TCP) socket with kernel stamps switched on; None where
        the option does not exist or cannot be set (the transport keeps reading). `handlers`: what gets
        a kernel-stamped read `(t, data)`, a read without a stamp `(data)`, and a read error; and,
        optionally, the time of a read the C reader recorded that ended the body (else it hands the
        last chunk to the first handler)."""
        if SO_TIMESTAMPNS is None or transport.get_extra_info("sslcontext") is not None:
            return None
        raw = transport.get_extra_info("socket")
        if raw is None:
            return None
        try:
            sock = _asking_stamps(socket.socket(fileno=os.dup(raw.fileno())))
        except OSError:
            return None
        return None if sock is None else cls(sock, loop, transport, handlers)

    def start(self) -> None:
        """Take the reading over from the transport (call once the transport reads: uvloop starts its
        reading after `connection_made`)."""
        if self.reading or self.sock.fileno() < 0 or self.transport.is_closing():
            return
        self.transport.pause_reading()
        self.loop.add_reader(self.fd, self.native or self._readable)
        self.reading = True
        _counts["kernel_connections"] += 1
        if self.native is not None:
            _counts["native_connections"] += 1

    def _readable(self) -> None:
        if self.transport.is_closing():  # aborted: the transport reads no more, nor do we
            self.stop()
            return
        try:
            data, anc, _flags, _addr = self.recvmsg(BUF, _CMSG)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self.stop()
            self.failed(exc)
            return
        if not data:
            self._eof()
            return
        if anc:
            sec, nsec = _timespec(anc[0][2])
            kernel_ns = sec * 1_000_000_000 + nsec
            if not -RESAMPLE_NS < kernel_ns - _clock[0] < RESAMPLE_NS:
                _resample(kernel_ns)
            self.received(kernel_ns - _clock[1], data)
        else:
            self.plain(data)  # the connection stamps it as the transport's reads

    def _eof(self) -> None:
        """End of file: the transport reads it again and closes as before."""
        self.stop()
        self.transport.resume_reading()

    def sink(
        self, pieces: list[tuple[int, bytes]] | None, marks: bytearray | None, elided: bytearray | None = None
    ) -> None:
        """The C reader records a read that is exactly one whole chunk in `pieces` and `marks` (the
        connection's `ChunkedBody` is between chunks), letting the marked reads between the first and
        the last go to their stamps in `elided` when given (chunked.Reads); None: every read goes to
        the handlers."""
        if self.native is not None:
            self.native.sink(pieces, marks, elided)

    def stop(self) -> None:
        """Stop reading (the descriptor stays open until `close`)."""
        if self.reading:
            self.reading = False
            self.loop.remove_reader(self.fd)

    def close(self) -> None:
        """Stop reading and close the duplicate descriptor (the socket closes with the transport's);
        nothing to close when the connection took the descriptor over (`socket.detach`)."""
        self.stop()
        if self.native is not None:
            self.native.release()  # its references (the transport, the connection's handlers)
        self.sock.close()
