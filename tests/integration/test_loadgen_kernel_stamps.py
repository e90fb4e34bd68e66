"""Kernel receive stamps (`loadgen.transport.kernel_stamps`) in the raw client, on Linux: against a
server process that stamps each token's send (perf_counter_ns, the same clock in every process), while
the client's event loop burns CPU on purpose, kernel stamps stay near the true sends and read stamps
(what the transport path takes, forced by switching the option off) trail them by the busy periods;
the manifest says which stamps a run used."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import statistics
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from loadgen.config import RunConfig
from loadgen.records import RequestRecord
from loadgen.run.runner import run_benchmark
from loadgen.transport import evloop, kernel_stamps
from loadgen.transport.finish import finalize
from loadgen.transport.rawhttp import RawClient
from tests.conftest import GOLDEN_VLLM
from tests.loadgen_servers import golden_replay_app, serve

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(kernel_stamps.SO_TIMESTAMPNS is None, reason="no SO_TIMESTAMPNS here"),
    pytest.mark.usefixtures("kernel_stamping_on"),
]

TOKENS, GAP_MS, BUSY_MS, EVERY_MS = 40, 8.0, 4.0, 6.0

# One connection; per request: read the head and body, answer a chunked SSE stream of TOKENS events
# GAP_MS apart, each stamped (perf_counter_ns) right before its send; at EOF print the stamps.
SERVER = r"""
import json, socket, sys, time
tokens, gap_ns = int(sys.argv[1]), int(float(sys.argv[2]) * 1e6)
lsock = socket.socket(); lsock.bind(("127.0.0.1", 0)); lsock.listen()
print(lsock.getsockname()[1], flush=True)
conn, _ = lsock.accept(); conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
stamps, buf = [], b""
while True:
    while b"\r\n\r\n" not in buf:
        got = conn.recv(65536)
        if not got:
            print(json.dumps(stamps), flush=True); sys.exit(0)
        buf += got
    head, _, buf = buf.partition(b"\r\n\r\n")
    length = int([h for h in head.split(b"\r\n") if h.lower().startswith(b"content-length:")][0][15:])
    while len(buf) < length:
        buf += conn.recv(65536)
    buf = buf[length:]
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
    sent, due = [], time.perf_counter_ns() + gap_ns
    for i in range(tokens):
        while (left := due - time.perf_counter_ns()) > 0:
            time.sleep(left / 1e9)
        msg = b'data: {"i":%d,"choices":[{"index":0,"text":" t"}]}\n\n' % i
        sent.append(time.perf_counter_ns())
        conn.sendall(b"%x\r\n%s\r\n" % (len(msg), msg))
        due += gap_ns
    conn.sendall(b"5\r\ndata:\r\n0\r\n\r\n")
    stamps.append(sent)
"""


@contextmanager
def stamping_server() -> Iterator[tuple[str, subprocess.Popen[str]]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(TOKENS), str(GAP_MS)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        yield f"http://127.0.0.1:{int(proc.stdout.readline())}", proc
    finally:
        proc.kill()
        proc.wait()


def _burn(loop: asyncio.AbstractEventLoop, stop: list[bool]) -> None:
    """Hold the event loop with CPU work for BUSY_MS, every EVERY_MS (a busy client)."""
    end = time.perf_counter() + BUSY_MS / 1e3
    while time.perf_counter() < end:
        pass
    if not stop:
        loop.call_later(EVERY_MS / 1e3, _burn, loop, stop)


def _errors_ms(record: RequestRecord, sent: list[int]) -> list[float]:
    """Each read's stamp minus the send stamp of the last token event it holds (what a kernel stamp
    is: the arrival of the last segment read)."""
    errors, seen = [], 0
    for t, data in record.raw or ():
        seen += data.count(b'data: {"i"')
        if data.count(b'data: {"i"'):
            errors.append((t - sent[seen - 1]) / 1e6)
    assert seen == TOKENS
    return errors


async def _stream_errors(requests: int) -> list[float]:
    """Token-arrival errors of `requests` streams read while the event loop is kept busy."""
    with stamping_server() as (url, proc):
        client = RawClient(url, None, 0, 20.0, keep_text=True)  # the test reads every token event's bytes
        loop, stop = asyncio.get_running_loop(), []
        records = []
        try:
            loop.call_soon(_burn, loop, stop)
            for i in range(requests):
                record = RequestRecord(i, f"k-{i}", False, 0, 4, TOKENS)
                records.append(await client.send(record, "/v1/completions", b'{"prompt":[1]}'))
        finally:
            stop.append(True)
            client.close()
        assert proc.stdout is not None
        out = await asyncio.to_thread(proc.stdout.readline)
    sent = json.loads(out)
    assert len(sent) == requests
    errors = []
    for record, stamps in zip(records, sent, strict=True):
        assert record.outcome is None or record.outcome == "ok", record.error
        errors += _errors_ms(record, stamps)
    return errors


async def test_kernel_stamps_stay_near_the_sends_while_the_loop_is_busy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    kernel = await _stream_errors(3)
    assert kernel_stamps.counts()["kernel_connections"] >= 1
    assert kernel_stamps.arrival_stamps() == "kernel"
    monkeypatch.setattr(kernel_stamps, "SO_TIMESTAMPNS", None)  # the option does not exist: read stamps
    read = await _stream_errors(3)
    assert kernel_stamps.arrival_stamps() == "read"
    # the loop is held BUSY_MS of every BUSY_MS + EVERY_MS: a read stamp waits for about a third of
    # the reads, up to BUSY_MS; the kernel's stamp does not wait for the loop at all
    k50, r50 = statistics.median(kernel), statistics.median(read)
    k90 = statistics.quantiles(kernel, n=10)[-1]
    r90 = statistics.quantiles(read, n=10)[-1]
    assert min(kernel) >= -0.05  # never (much) before the send: same clock, stamped before sendall
    assert k50 < BUSY_MS / 8
    assert k90 < BUSY_MS / 4
    assert r90 > BUSY_MS / 4  # read stamps trail the busy periods...
    assert r90 > 3 * k90  # ... far more than kernel stamps do
    assert r50 >= k50


async def test_the_manifest_says_which_stamps_a_run_used(tmp_path: Path) -> None:
    app = golden_replay_app(GOLDEN_VLLM / "sse_completions.txt", {"object": "list", "data": [{"id": "m"}]})
    got = {}
    async with serve(app) as url:
        for http_client in ("raw", "aiohttp"):
            config = RunConfig(
                target="openai",
                base_url=url,
                endpoint="completions",
                num_prompts=2,
                max_concurrency=1,
                metrics_port=0,
                linger_s=0,
                results_dir=str(tmp_path / http_client),
                output_len="fixed:24",
                http_client=http_client,
            )
            result = await run_benchmark(config, progress=False)
            assert result.summary["requests"]["ok"] == 2
            manifest = json.loads((result.result_dir / "manifest.json").read_text())
            got[http_client] = manifest["client"]["arrival_stamps"]
            # one at a time (--max-concurrency): sent when the Python waker thread says so
            assert manifest["client"]["send_priority"] in ("realtime", "none")
    assert got == {"raw": "kernel", "aiohttp": "read"}


async def _reset_mid_body() -> RequestRecord:
    """One request to a server that sends the head and one token, then resets the connection."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        await reader.readexactly(14)
        msg = b'data: {"choices":[{"index":0,"text":" t"}]}\n\n'
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n" % (len(msg), msg))
        await writer.drain()
        await asyncio.sleep(0.05)
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()  # linger 0: a reset

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        client = RawClient(f"http://127.0.0.1:{port}", None, 0, 5.0)
        record = RequestRecord(0, "k-0", False, 0, 4, 3)
        record = finalize(await client.send(record, "/v1/completions", b'{"prompt":[1]}'))
        client.close()
    finally:
        server.close()
    return record


async def test_a_reset_mid_body_reads_the_same_with_either_stamps(monkeypatch: pytest.MonkeyPatch) -> None:
    kernel = await _reset_mid_body()
    assert kernel_stamps.arrival_stamps() == "kernel"
    monkeypatch.setattr(kernel_stamps, "SO_TIMESTAMPNS", None)
    read = await _reset_mid_body()
    assert kernel_stamps.arrival_stamps() == "read"
    assert kernel.outcome == read.outcome == "disconnect"
    assert kernel.error == read.error
    assert "ConnectionResetError" in (kernel.error or "")
    assert "mid-body" in (kernel.error or "")
    assert kernel.output_tokens == read.output_tokens == 1  # the token read before the reset is kept


def test_kernel_stamps_on_the_runs_own_loop() -> None:
    """The same streams on the loop a run uses (uvloop, which starts a transport's reading only after
    connection_made; the reader takes over after that) and a reset on it."""
    pytest.importorskip("uvloop")
    kernel = evloop.run(_stream_errors(2))
    assert kernel_stamps.arrival_stamps() == "kernel"
    assert statistics.median(kernel) < BUSY_MS / 8
    reset = evloop.run(_reset_mid_body())
    assert reset.outcome == "disconnect"
    assert "ConnectionResetError" in (reset.error or "")


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


async def test_a_connection_holds_as_many_descriptors_as_before() -> None:
    """The kernel reader reads on the descriptor the waker thread writes on: a preconnected connection
    holds its socket and one duplicate (plus the server's end here), the client one more socket in
    all, and none is left after close."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        before = _open_fds()
        client = RawClient(f"http://127.0.0.1:{port}", None, 0, 5.0)
        assert await client.preconnect(8, 5.0) == 8
        await asyncio.sleep(0.05)  # the readers take over; the server accepts
        assert kernel_stamps.counts()["kernel_connections"] == 8
        # client socket, its duplicate, server's end; and the client's one socket that keeps the host
        # stamping received packets (kernel_stamps.hold_stamping)
        assert _open_fds() - before == 8 * 3 + 1
        client.close()
        for _ in range(100):
            await asyncio.sleep(0.01)
            if _open_fds() == before:
                break
        assert _open_fds() == before
    finally:
        server.close()
