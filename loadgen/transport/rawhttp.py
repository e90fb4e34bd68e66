"""A minimal HTTP/1.1 streaming client on a raw `asyncio.Protocol` (`--http-client raw`).

Same job as `client.send_request` with less per-request and per-read work: request bytes built once;
each read is stamped (with the kernel's receive time where Linux gives it: `kernel_stamps`, else
when Python gets it: `read_stamp`) and only the framing is read (head once;
chunked via `stamping.ChunkedBody`, Content-Length, or until close); the reading task wakes once, at
the end of the body. Keep-alive connections are pooled, one per request in flight, up to the limit.
Outcomes are the aiohttp client's (timeout; connect_error: refused, unreachable, TLS handshake
failed; disconnect: reset or closed mid-body; http_error with the status; protocol_error);
cancellation closes the connection.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any, Protocol, cast
from urllib.parse import urlsplit

from loadgen.records import RequestRecord, mark_cut_short
from loadgen.transport import kernel_stamps
from loadgen.transport.chunked import MAX_CHUNK_HEAD, ChunkedBody, Reads, chunk_size_prefix
from loadgen.transport.kernel_stamps import KernelReader
from loadgen.transport.plainhttp import url_basic_auth

MAX_HEAD = 65536
_STATUS_START = b"HTTP/1."  # what every response head starts with
_now = time.perf_counter_ns
_FD_LOCK = threading.Lock()  # a connection's write descriptor is closed and written under it

# runs an action in the waker thread at a perf_counter_ns time (PreciseWaker.post_at)
PostAt = Callable[[int, Callable[[], None]], None]


class Writer(Protocol):
    """The C send-time writer's side of `dispatch.PreciseWaker`: `post_write` returns a ticket (None
    where the C module is not built) and `retire` drops a descriptor's posts before it is closed."""

    def post_write(self, due_ns: int, fd: int, data: bytes, attention: Callable[[Any], None]) -> Any | None:
        """Write `data` to `fd` at `due_ns`; `attention(ticket)` when not written whole."""
        ...

    def retire(self, fd: int) -> None:
        """Drop the posts to `fd`."""
        ...


_batch: list[object] = [None, 0]  # [the loop, the stamp] of the batch of reads being handled now


def read_stamp(loop: asyncio.AbstractEventLoop) -> int:
    """The arrival stamp of a read: `perf_counter_ns()` at the first read handled in this turn of the
    event loop, shared by every read handled in the same turn. The loop hands over the reads that one
    poll found ready one after another; each was already in the kernel when the poll returned, so the
    turn's first stamp is the closest to its arrival (a read stamped on its own turn comes later by
    the handling of the reads before it: tens of µs each, 64 streams in lock step spread their stamps
    over ~0.3 ms). A callback queued with the first read ends the batch before the next poll."""
    if _batch[0] is loop:
        return _batch[1]  # type: ignore[return-value]
    t = _now()
    _batch[0], _batch[1] = loop, t
    loop.call_soon(_end_batch)
    return t


def _end_batch() -> None:
    _batch[0] = None


class RawProtocolError(Exception):
    """The server's bytes are not an HTTP/1.1 response we can frame."""


class RawConnectError(OSError):
    """No connection could be opened (refused, unreachable, name not resolved, TLS handshake)."""


class _Conn(asyncio.Protocol):
    """One keep-alive connection; an exchange fills `reads` and resolves `waiter` at end of body."""

    __slots__ = (
        "transport", "waiter", "reads", "buf", "mode", "status", "left", "end_ns", "chunked", "reusable",
        "got_bytes", "record", "wfd", "loop", "kernel", "read_error", "ticket", "writer",
    )  # fmt: skip

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.waiter: asyncio.Future[None] | None = None
        self.reads: list[tuple[int, bytes]] = []
        self.buf = b""  # response head so far, or the tail of a chunked body after its last chunk
        self.mode = ""  # "" head pending, "chunked", "length", "close", "tail" (after last chunk)
        self.status = self.left = self.end_ns = 0  # left: Content-Length bytes still due
        self.chunked: ChunkedBody | None = None
        self.reusable, self.got_bytes = True, False
        self.record: RequestRecord | None = None
        self.wfd = -1  # our own duplicate of the socket's descriptor, for writes from the waker thread
        self.loop: asyncio.AbstractEventLoop | None = None
        self.kernel: KernelReader | None = None  # reads the socket itself for kernel stamps
        self.read_error: OSError | None = None  # what the kernel reader's recvmsg raised
        self.ticket: Any = None  # the C writer's ticket of the request posted on this connection
        self.writer: Writer | None = None  # that writer (its posts are retired with the descriptor)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not an asyncio.Transport subclass
        self.loop = loop = asyncio.get_running_loop()
        handlers = (self._received, self.data_received, self._read_failed, self._ended)
        self.kernel = KernelReader.attach(self.transport, loop, handlers)
        if self.kernel is not None:
            self.wfd = self.kernel.fd  # the waker writes on the reader's duplicate: 2 descriptors, as before
            loop.call_soon(self.kernel.start)  # after the transport starts reading (uvloop: after this)

    def _read_failed(self, exc: OSError) -> None:
        """The kernel reader's read failed: close the connection with that error, as the transport would."""
        self.read_error = exc
        if self.transport is not None:
            self.transport.abort()

    def write_fd(self) -> int:
        """A descriptor of this connection's (non-blocking) socket that stays ours until connection_lost,
        so a write from the waker thread can never land on a reused descriptor number; -1 if none."""
        if self.wfd < 0 and self.transport is not None and not self.transport.is_closing():
            sock = self.transport.get_extra_info("socket")
            if sock is not None:
                self.wfd = os.dup(sock.fileno())
        return self.wfd

    def write_at_due(self, waiter: asyncio.Future[None], data: bytes, record: RequestRecord) -> None:
        """In the waker thread, at the send time: write the request to the socket (the loop leaves the
        idle transport alone meanwhile) and stamp `record.sent_ns` right after (and, in case the loop
        were to see the whole response before this thread gets the GIL back, right before). What is
        left when the socket buffer is full goes to the transport; a failure to the exchange's waiter."""
        loop = self.loop
        try:
            with _FD_LOCK:
                if self.wfd < 0:  # dropped (cancelled, failed): the record is not touched
                    raise ConnectionResetError("connection closed before the send")
                record.sent_ns = time.perf_counter_ns()  # the stamp if the loop parsed the response first
                try:
                    written = os.write(self.wfd, data)
                except BlockingIOError:
                    written = 0
            record.sent_ns = time.perf_counter_ns()
        except OSError as exc:
            if loop is not None:
                loop.call_soon_threadsafe(self._send_failed, waiter, exc)
            return
        if written < len(data) and loop is not None:
            loop.call_soon_threadsafe(self._send_rest, waiter, data[written:])

    def attend(self, waiter: asyncio.Future[None], data: bytes, ticket: Any) -> None:
        """The C writer did not write the request whole (in the loop): the rest to the transport, or
        the exchange fails as a failed write from the waker thread fails it."""
        state = ticket.state
        if state == kernel_stamps.TICKET_PARTIAL:
            self._send_rest(waiter, data[ticket.written :])
        elif state == kernel_stamps.TICKET_FAILED:
            self._send_failed(waiter, OSError(ticket.err, os.strerror(ticket.err)))
        elif state == kernel_stamps.TICKET_DROPPED:
            self._send_failed(waiter, ConnectionResetError("connection closed before the send"))

    def take_ticket(self, record: RequestRecord) -> None:
        """The exchange is over: its send stamp from the C writer's ticket, if it wrote the request."""
        ticket, self.ticket = self.ticket, None
        if ticket is not None and ticket.sent_ns:
            record.sent_ns = ticket.sent_ns

    def _send_failed(self, waiter: asyncio.Future[None], exc: OSError) -> None:
        if self.waiter is waiter and not waiter.done():
            why = f"{type(exc).__name__}: {exc} (before the response head)"
            waiter.set_exception(ConnectionResetError(why))

    def _send_rest(self, waiter: asyncio.Future[None], rest: bytes) -> None:
        if self.waiter is waiter and self.transport is not None and not self.transport.is_closing():
            self.transport.write(rest)

    def close_wfd(self) -> None:
        """Close our duplicate descriptor (the socket itself closes once the transport's is closed too);
        the kernel reader, which reads on it, stops first (its socket object gives the descriptor up)."""
        kernel = self.kernel
        if kernel is not None:
            kernel.stop()
        if self.wfd >= 0:
            with _FD_LOCK:
                if self.writer is not None:
                    self.writer.retire(self.wfd)  # no C write lands on the number once it is closed
                if kernel is not None and kernel.fd == self.wfd:
                    kernel.sock.detach()
                os.close(self.wfd)
                self.wfd = -1

    def start(
        self, waiter: asyncio.Future[None], reads: list[tuple[int, bytes]], record: RequestRecord
    ) -> None:
        self.waiter, self.reads, self.record, self.buf, self.mode = waiter, reads, record, b"", ""
        self.status, self.chunked, self.got_bytes, self.end_ns = 0, None, False, 0

    def data_received(self, data: bytes) -> None:
        """A read the transport made (no kernel stamp): stamped now (`read_stamp`)."""
        loop = self.loop
        kernel_stamps.count_read_stamped()
        self._received(read_stamp(loop) if loop is not None else _now(), data)

    def _received(self, t: int, data: bytes) -> None:
        self.got_bytes = True
        mode = self.mode
        if mode == "chunked":
            assert self.chunked is not None
            rest = self.chunked.feed(t, data)
            if rest is not None:
                self._tail(t, rest)
        elif mode == "length":
            self._length(t, data)
        elif mode == "close":
            self.reads.append((t, data))
        elif mode == "tail":
            self._tail(t, data)
        elif self.waiter is None or self.waiter.done():
            self.reusable = False  # bytes nobody asked for
        else:
            self._head(t, data)
        kernel = self.kernel
        if kernel is not None and kernel.native is not None:
            self._sync_sink(kernel)

    def _ended(self, t: int) -> None:
        """The C reader recorded a read of data chunks that ended with exactly the last chunk,
        `0\r\n\r\n`, and stopped recording: what `_received` makes of those five bytes (`feed` hands
        them to `_tail`, which ends the exchange), without parsing them."""
        self.got_bytes, self.buf = True, b""
        self._done(t)

    def _sync_sink(self, kernel: KernelReader) -> None:
        """Let the C reader record the next read itself when the body is chunked and between chunks
        (what `ChunkedBody.feed`'s fast path would take); else have it hand every read here. Called
        after every read that reaches Python, so the read that ends an exchange (the last chunk is
        never one the C reader takes) leaves the sink cleared for the next; an exchange cut short
        closes its connection."""
        body = self.chunked
        if self.mode == "chunked" and body is not None and not body.need and not body.head:
            kernel.sink(body.pieces, body.marks, getattr(body.pieces, "elided", None))
        else:
            kernel.sink(None, None)

    def _head(self, t: int, data: bytes) -> None:
        buf = self.buf + data
        parsed = None if kernel_stamps.parse_head is None else kernel_stamps.parse_head(buf)
        if parsed is not None:  # a whole usual head, parsed in C as below (_kread.head)
            self.buf = b""
            self.status, http10, fields, body = parsed
            if self.record is not None:
                self.record.http_status = self.status
            if fields.get("connection") == "close" or http10:
                self.reusable = False
            self._framing(t, fields, body)
            return
        cut = buf.find(b"\r\n\r\n")
        if cut < 0:
            self.buf = buf
            if len(buf) > MAX_HEAD:
                self._fail(RawProtocolError("response head too long"))
            elif not _STATUS_START.startswith(buf[: len(_STATUS_START)]):  # random bytes: fail now
                line = buf.split(b"\r\n", 1)[0][:80].decode("latin-1")
                self._fail(RawProtocolError(f"invalid status line {line!r}"))
            return
        head, body = buf[:cut].decode("latin-1").split("\r\n"), buf[cut + 4 :]
        self.buf = b""
        status = head[0].split(" ", 2)
        # isascii: str.isdigit() takes a latin-1 superscript (b"\xb2") that int() does not
        if (
            len(status) < 2
            or not status[0].startswith("HTTP/1.")
            or not (status[1].isascii() and status[1].isdigit())
        ):
            self._fail(RawProtocolError(f"invalid status line {head[0][:80]!r}"))
            return
        self.status = int(status[1])
        if self.record is not None:
            self.record.http_status = self.status
        fields = {k.strip().lower(): v.strip().lower() for k, _, v in (h.partition(":") for h in head[1:])}
        if fields.get("connection") == "close" or status[0] == "HTTP/1.0":
            self.reusable = False
        self._framing(t, fields, body)

    def _framing(self, t: int, fields: dict[str, str], body: bytes) -> None:
        """Pick the body framing from the head's fields and feed the body bytes of this read."""
        if self.status in (204, 304) or 100 <= self.status < 200:
            self._done(t)
        elif fields.get("transfer-encoding") == "chunked":
            if self.status != 200 and isinstance(self.reads, Reads):
                self.reads.elided = None  # an error body is read whole (finalize quotes it)
            self.mode, self.chunked = "chunked", ChunkedBody(self.reads)
            if body:
                rest = self.chunked.feed(t, body)
                if rest is not None:
                    self._tail(t, rest)
        elif "content-length" in fields:
            try:
                self.left = int(fields["content-length"])
            except ValueError:
                self._fail(RawProtocolError(f"invalid Content-Length {fields['content-length']!r}"))
                return
            self.mode = "length"
            if body or not self.left:
                self._length(t, body)
        else:
            self.mode, self.reusable = "close", False
            if body:
                self.reads.append((t, body))

    def _length(self, t: int, data: bytes) -> None:
        if len(data) > self.left:
            data, self.reusable = data[: self.left], False
        if data:
            self.reads.append((t, data))
            self.left -= len(data)
        if not self.left:
            self._done(t)

    def _tail(self, t: int, data: bytes) -> None:
        """Bytes from the last chunk's size line on: `0[;ext]\\r\\n`, trailers, `\\r\\n`."""
        self.mode, buf = "tail", self.buf + data
        cut = buf.find(b"\r\n")
        if cut < 0:
            if len(buf) > MAX_CHUNK_HEAD or not chunk_size_prefix(buf):
                self._fail(RawProtocolError(f"invalid chunk size line {buf[:40]!r}"))
                return
            self.buf = buf
            return
        try:
            size = int(buf[:cut].split(b";", 1)[0], 16)
        except ValueError:
            size = -1
        if size != 0 or not buf[:1].isalnum():
            self._fail(RawProtocolError(f"invalid chunk size line {buf[:cut][:40]!r}"))
            return
        end = buf.find(b"\r\n\r\n", cut) if buf[cut + 2 : cut + 4] != b"\r\n" else cut
        if end < 0:
            self.buf = buf
            return
        if len(buf) > end + 4:
            self.reusable = False
        self.buf = b""
        self._done(t)

    def _done(self, t: int) -> None:
        self.mode, self.end_ns = "", t
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)

    def _fail(self, exc: Exception) -> None:
        self.reusable = False
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(exc)
        if self.kernel is not None:
            self.kernel.stop()
        if self.transport is not None:
            self.transport.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        self.reusable = False
        self.close_wfd()
        if self.kernel is not None:
            self.kernel.close()  # (its descriptor, when the waker's, is closed already)
        exc = exc or self.read_error
        if self.mode == "close":
            self._done(time.perf_counter_ns())
            return
        if self.waiter is not None and not self.waiter.done():
            if not self.mode and self.buf:  # the server stopped inside a head: a connection cut short
                where = f"after {len(self.buf)} bytes of the response head"
            else:
                where = "before the response head" if not self.mode else "mid-body"
            why = f"{type(exc).__name__}: {exc} ({where})" if exc else f"server closed the connection {where}"
            self.waiter.set_exception(ConnectionResetError(why))


class RawClient:
    """Keep-alive pool and request sender for one base URL (see module docstring)."""

    def __init__(
        self, base_url: str, api_key: str | None, limit: int, timeout_s: float, keep_text: bool = False
    ) -> None:
        """`keep_text`: keep every read's bytes (a closed-loop session reads its answer's text); else the
        C reader keeps the stamps only of the token events between a stream's first and last
        (chunked.Reads.elided)."""
        self.keep_text = keep_text
        url = urlsplit(base_url)
        self.host = url.hostname or "127.0.0.1"
        self.tls = url.scheme == "https"
        self.port = url.port or (443 if self.tls else 80)
        self.prefix = url.path.rstrip("/")
        self.timeout_s = timeout_s
        host = url.netloc.rsplit("@", 1)[-1]
        basic = url_basic_auth(url)  # as aiohttp: credentials in the URL, unless an API key is given
        auth = f"Authorization: Bearer {api_key}\r\n" if api_key else ""
        if not api_key and basic is not None:
            auth = f"Authorization: {basic}\r\n"
        self._fixed = (
            f"Host: {host}\r\nContent-Type: application/json\r\nAccept-Encoding: identity\r\n{auth}"
        ).encode()
        self._lines: dict[str, bytes] = {}
        self._idle: list[_Conn] = []
        self._open: set[_Conn] = set()
        self._slots = asyncio.Semaphore(limit) if limit else None
        kernel_stamps.reset_counts()  # this run's (the manifest's client.arrival_stamps)
        self._stamping: Any = None  # kernel_stamps.hold_stamping's socket, from the first connection on
        self._stamping_asked = self.tls  # TLS reads carry no kernel stamps

    def request_bytes(self, path: str, body: bytes, x_request_id: str) -> bytes:
        """The whole request: prebuilt request line and fixed headers, then length, id and body."""
        line = self._lines.get(path)
        if line is None:
            line = self._lines[path] = f"POST {self.prefix}{path} HTTP/1.1\r\n".encode() + self._fixed
        tail = b"Content-Length: %d\r\nX-Request-Id: %s\r\n\r\n" % (len(body), x_request_id.encode())
        return line + tail + body

    def _idle_conn(self) -> _Conn | None:
        while self._idle:
            conn = self._idle.pop()
            if conn.transport is not None and not conn.transport.is_closing() and conn.reusable:
                return conn
            self._open.discard(conn)
        return None

    async def preconnect(self, count: int, timeout_s: float) -> int:
        """Open up to `count` keep-alive connections now and keep them idle for the first requests,
        so the run's opening stretch (when no connection can be reused yet) opens none while it sends;
        the ones not open within `timeout_s` are left to be opened on demand. Returns how many opened."""
        if count <= 0:
            return 0
        deadline = asyncio.get_running_loop().time() + timeout_s
        results = await asyncio.gather(
            *(self._open_new(deadline) for _ in range(count)), return_exceptions=True
        )
        opened = [c for c in results if isinstance(c, _Conn)]
        for conn in opened:
            conn.write_fd()  # the waker's duplicate now, not at the first send
        self._idle.extend(opened)
        return len(opened)

    def _stamp_from_now(self) -> None:
        """Before the first connection: have the host stamp received packets (hold_stamping)."""
        if not self._stamping_asked:
            self._stamping_asked = True
            self._stamping = kernel_stamps.hold_stamping()

    async def _open_new(self, deadline: float) -> _Conn:
        self._stamp_from_now()
        loop, tls = asyncio.get_running_loop(), True if self.tls else None
        async with asyncio.timeout_at(deadline):
            _, conn = await loop.create_connection(_Conn, self.host, self.port, ssl=tls)
        self._open.add(conn)
        return conn

    async def _connect(self, deadline: float) -> tuple[_Conn, bool]:
        """An idle keep-alive connection, else a new one (opened before `deadline`, loop time)."""
        conn = self._idle_conn()
        if conn is not None:
            return conn, True
        self._stamp_from_now()
        loop, tls = asyncio.get_running_loop(), True if self.tls else None
        try:
            async with asyncio.timeout_at(deadline):
                _, conn = await loop.create_connection(_Conn, self.host, self.port, ssl=tls)
        except TimeoutError:
            raise
        except OSError as exc:
            raise RawConnectError(f"{type(exc).__name__}: {exc}") from exc
        self._open.add(conn)
        return conn, False

    def _write(
        self,
        conn: _Conn,
        waiter: asyncio.Future[None],
        data: bytes,
        record: RequestRecord,
        due_ns: int,
        post_at: PostAt | None,
        writer: Writer | None = None,
    ) -> None:
        """Write the request at `due_ns`: straight to the socket from the C writer's thread (`writer`)
        or else the waker thread when one is given and the time is still ahead (the loop may be busy
        reading then), else from the loop now."""
        assert conn.transport is not None
        if post_at is not None and not self.tls and due_ns > time.perf_counter_ns() and conn.write_fd() >= 0:
            if writer is not None:
                ticket = writer.post_write(due_ns, conn.wfd, data, partial(conn.attend, waiter, data))
                if ticket is not None:
                    conn.ticket, conn.writer = ticket, writer
                    return
            post_at(due_ns, partial(conn.write_at_due, waiter, data, record))
            return
        record.sent_ns = time.perf_counter_ns()
        conn.transport.write(data)

    async def _exchange(
        self,
        data: bytes,
        reads: list[tuple[int, bytes]],
        record: RequestRecord,
        due_ns: int,
        post_at: PostAt | None,
        deadline: float,
        writer: Writer | None = None,
    ) -> _Conn:
        """Send `data` and wait for the end of the response (TimeoutError at `deadline`, loop time);
        retried once on a fresh connection when a reused keep-alive connection turns out closed
        before any byte came back."""
        loop = asyncio.get_running_loop()
        for _attempt in range(2):
            conn, reused = await self._connect(deadline)
            waiter = loop.create_future()
            conn.start(waiter, reads, record)
            expiry = loop.call_at(deadline, _expire, waiter)  # cheaper than a timeout scope per request
            try:
                self._write(conn, waiter, data, record, due_ns, post_at, writer)
                await waiter
            except ConnectionResetError:
                self._drop(conn)
                if reused and not conn.got_bytes:
                    continue
                raise
            except BaseException:
                self._drop(conn)
                raise
            finally:
                expiry.cancel()
                conn.take_ticket(record)
            return conn
        raise ConnectionResetError("server closed the connection twice before the response head")

    def _drop(self, conn: _Conn) -> None:
        conn.waiter, conn.record = None, None
        self._open.discard(conn)
        if conn.kernel is not None:
            conn.kernel.stop()
        if conn.transport is not None:
            conn.transport.abort()
        conn.close_wfd()

    def _release(self, conn: _Conn) -> None:
        conn.waiter, conn.record = None, None
        if conn.reusable and conn.transport is not None and not conn.transport.is_closing():
            self._idle.append(conn)
        else:
            self._drop(conn)

    async def send(
        self,
        record: RequestRecord,
        path: str,
        body: bytes,
        due_ns: int = 0,
        post_at: PostAt | None = None,
        writer: Writer | None = None,
    ) -> RequestRecord:
        """POST `body` and record the stamped response; `client.finalize(record)` parses it later.

        With `post_at`, called ahead of `due_ns`: the connection is readied now and the request written
        at `due_ns` (sent_ns stamped right after that write) by the C writer's thread where `writer`
        has one, else by the waker thread."""
        data = self.request_bytes(path, body, record.x_request_id)
        reads = Reads()
        if not self.keep_text:
            reads.elided = bytearray()
        slots = self._slots
        record.sent_ns = max(time.perf_counter_ns(), due_ns)
        deadline = asyncio.get_running_loop().time() + self.timeout_s
        try:
            if slots is not None:
                async with asyncio.timeout_at(deadline):
                    await slots.acquire()
            try:
                conn = await self._exchange(data, reads, record, due_ns, post_at, deadline, writer)
            finally:
                if slots is not None:
                    slots.release()
            self._release(conn)
            if conn.status != 200:
                return _http_error(record, conn.status, reads)
            record.done_ns, record.raw = conn.end_ns, reads
        except asyncio.CancelledError:
            mark_cut_short(record, reads, "cancelled", "cancelled before completion")
            raise
        except TimeoutError:
            mark_cut_short(record, reads, "timeout", "no complete response within --request-timeout")
        except RawProtocolError as exc:
            mark_cut_short(record, reads, "protocol_error", str(exc))
        except RawConnectError as exc:
            mark_cut_short(record, reads, "connect_error", str(exc)[:200])
        except OSError as exc:  # reset, closed mid-body
            status = record.http_status
            if status is not None and status != 200:  # as aiohttp: the error body is best effort
                return _http_error(record, status, reads)
            mark_cut_short(record, reads, "disconnect", f"{type(exc).__name__}: {str(exc)[:200]}")
        return record

    def close(self) -> None:
        """Close every connection."""
        for conn in list(self._open):
            self._drop(conn)
        self._idle.clear()
        if self._stamping is not None:
            self._stamping.close()
            self._stamping, self._stamping_asked = None, self.tls


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError())


def _http_error(record: RequestRecord, status: int, reads: list[tuple[int, bytes]]) -> RequestRecord:
    text = b"".join(d for _, d in reads).decode(errors="replace")
    record.outcome, record.error = "http_error", f"HTTP {status}: {text.strip()[:300]}"
    return record
