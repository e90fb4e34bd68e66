"""The raw HTTP/1.1 client (`--http-client raw`) against a scripted loopback server: framing (chunked
with trailers, Content-Length, until close, heads split across reads), keep-alive reuse, and every
failure mapped to the aiohttp client's outcome; plus a simulated-engine run with both clients."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from loadgen.config import HTTP_CLIENTS, RunConfig
from loadgen.records import RequestRecord
from loadgen.run.runner import run_benchmark
from loadgen.transport import kernel_stamps
from loadgen.transport.aiohttp_client import finalize
from loadgen.transport.dispatch import PreciseWaker
from loadgen.transport.rawhttp import RawClient
from tests.loadgen_servers import free_port

pytestmark = pytest.mark.timeout(30)

HEAD_CHUNKED = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


def _sse(n: int) -> list[bytes]:
    """SSE messages of a vLLM-style stream with `n` tokens, usage and [DONE]."""
    token = {"id": "c", "object": "text_completion", "choices": [{"index": 0, "text": " t"}]}
    usage = {"id": "c", "choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": n}}
    msgs = [b"data: " + json.dumps(token).encode() + b"\n\n" for _ in range(n)]
    return [*msgs, b"data: " + json.dumps(usage).encode() + b"\n\n", b"data: [DONE]\n\n"]


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


Reply = Callable[[asyncio.Transport], "asyncio.Future[None] | None"]


class _Scripted(asyncio.Protocol):
    def __init__(self, server: Scripted) -> None:
        self.server, self.buf = server, b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.server.connections += 1

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while (cut := self.buf.find(b"\r\n\r\n")) >= 0:
            head = self.buf[:cut].decode()
            length = int(next(h for h in head.split("\r\n") if h.lower().startswith("content-length:"))[15:])
            if len(self.buf) < cut + 4 + length:
                return
            self.server.requests.append(self.buf[: cut + 4 + length])
            self.buf = self.buf[cut + 4 + length :]
            assert self.transport is not None
            asyncio.ensure_future(self.server.replies.pop(0)(self.transport))

    def connection_lost(self, exc: Exception | None) -> None:
        self.server.closed += 1


class Scripted:
    """Answers each request with the next scripted coroutine (which writes to the transport)."""

    def __init__(self, *replies: Callable[[asyncio.Transport], object]) -> None:
        self.replies = list(replies)
        self.requests: list[bytes] = []
        self.connections = self.closed = 0


@asynccontextmanager
async def scripted(server: Scripted) -> AsyncIterator[str]:
    loop = asyncio.get_running_loop()
    srv = await loop.create_server(lambda: _Scripted(server), "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{srv.sockets[0].getsockname()[1]}"
    finally:
        srv.close()


def writes(*pieces: bytes, close: bool = False) -> Callable[[asyncio.Transport], object]:
    async def reply(transport: asyncio.Transport) -> None:
        for piece in pieces:
            transport.write(piece)
            await asyncio.sleep(0.002)
        if close:
            transport.close()

    return reply


def stall() -> Callable[[asyncio.Transport], object]:
    async def reply(transport: asyncio.Transport) -> None:
        transport.write(HEAD_CHUNKED + _chunk(_sse(1)[0]))

    return reply


async def _send(client: RawClient, i: int = 0) -> RequestRecord:
    record = RequestRecord(i, f"run-{i:06d}", False, 0, 4, 3)
    return finalize(await client.send(record, "/v1/completions", b'{"prompt":[1]}'))


def _client(url: str, timeout_s: float = 5.0, api_key: str | None = None) -> RawClient:
    return RawClient(url, api_key, 0, timeout_s)


async def test_chunked_stream_with_split_head_and_trailers_reuses_the_connection() -> None:
    body = b"".join(_chunk(m) for m in _sse(3))
    server = Scripted(
        writes(HEAD_CHUNKED[:20], HEAD_CHUNKED[20:] + body[:7], body[7:], b"0\r\nX-Trailer: 1\r\n\r\n"),
        writes(HEAD_CHUNKED + body + b"0\r\n\r\n"),
    )
    async with scripted(server) as url:
        client = _client(url, api_key="sk-x")
        first, second = await _send(client, 0), await _send(client, 1)
        client.close()
    for record in (first, second):
        assert (record.outcome, record.http_status, record.output_tokens) == ("ok", 200, 3)
        assert len(record.token_ns) == 3
        assert record.done_ns is not None
        assert record.done_ns >= record.sent_ns
    assert server.connections == 1  # keep-alive
    head = server.requests[0].split(b"\r\n\r\n")[0].decode().split("\r\n")
    assert head[0] == "POST /v1/completions HTTP/1.1"
    assert sorted(h.split(":")[0] for h in head[1:]) == [
        "Accept-Encoding",
        "Authorization",
        "Content-Length",
        "Content-Type",
        "Host",
        "X-Request-Id",
    ]
    assert "X-Request-Id: run-000000" in head
    assert "Authorization: Bearer sk-x" in head


def test_request_bytes_are_built_once_with_credentials_from_the_url() -> None:
    client = RawClient("http://user:p%40ss@127.0.0.1:8000/prefix/", None, 0, 1.0)
    data = client.request_bytes("/v1/completions", b"{}", "r-1")
    assert data == (
        b"POST /prefix/v1/completions HTTP/1.1\r\nHost: 127.0.0.1:8000\r\nContent-Type: application/json\r\n"
        b"Accept-Encoding: identity\r\nAuthorization: Basic dXNlcjpwQHNz\r\n"
        b"Content-Length: 2\r\nX-Request-Id: r-1\r\n\r\n{}"
    )


async def test_content_length_and_until_close_bodies() -> None:
    sse = b"".join(_sse(2))
    server = Scripted(
        writes(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(sse), sse),
        writes(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + sse[:30], sse[30:], close=True),
        writes(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\n\r\nbusy"),
        writes(b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 9\r\n\r\nboo", close=True),
    )
    async with scripted(server) as url:
        client = _client(url)
        records = [await _send(client, i) for i in range(4)]
        client.close()
    assert [(r.outcome, r.output_tokens) for r in records[:2]] == [("ok", 2), ("ok", 2)]
    assert (records[2].outcome, records[2].http_status, records[2].error) == (
        "http_error",
        503,
        "HTTP 503: busy",
    )
    assert (records[3].outcome, records[3].error) == ("http_error", "HTTP 500: boo")  # cut short
    assert server.connections == 2  # the until-close body cannot be followed on its connection


async def test_failures_map_to_the_same_outcomes() -> None:
    body = b"".join(_chunk(m) for m in _sse(2))
    server = Scripted(
        writes(b"HTPP/9 what\r\n\r\n"),
        writes(b"HTTP/1.1 \xb2 OK\r\n\r\n"),  # a digit to str.isdigit(), not to int()
        writes(HEAD_CHUNKED + body + b"zz\r\n\r\n"),
        writes(HEAD_CHUNKED + _chunk(_sse(2)[0]), close=True),  # cut after the first token
        stall(),
    )
    async with scripted(server) as url:
        client = _client(url, timeout_s=0.5)
        garbage, superscript, bad_chunk, cut, stalled = [await _send(client, i) for i in range(5)]
        client.close()
    assert (garbage.outcome, superscript.outcome, bad_chunk.outcome) == ("protocol_error",) * 3
    assert "invalid status line" in (garbage.error or "")
    assert superscript.error == "invalid status line 'HTTP/1.1 ² OK'"
    assert "chunk size" in (bad_chunk.error or "")
    assert (cut.outcome, cut.http_status, cut.output_tokens) == ("disconnect", 200, 1)
    assert "mid-body" in (cut.error or "")
    assert stalled.outcome == "timeout"
    assert stalled.first_ns is not None  # a stalled stream keeps the tokens it got
    refused = await _send(_client(f"http://127.0.0.1:{free_port()}"))
    assert refused.outcome == "connect_error"  # as aiohttp: no connection was opened (item 4)


async def test_closed_keep_alive_is_retried_and_cancellation_closes_the_connection() -> None:
    body = b"".join(_chunk(m) for m in _sse(1)) + b"0\r\n\r\n"
    server = Scripted(
        writes(HEAD_CHUNKED + body),
        writes(close=True),  # the kept-alive connection is dropped without an answer: sent again
        writes(HEAD_CHUNKED + body),
        stall(),
    )
    async with scripted(server) as url:
        client = _client(url)
        assert (await _send(client, 0)).outcome == "ok"
        assert (await _send(client, 1)).outcome == "ok"
        assert (server.connections, len(server.requests)) == (2, 3)
        task = asyncio.ensure_future(_send(client, 2))
        for _ in range(200):
            if len(server.requests) == 4:
                break
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        for _ in range(200):
            if server.closed == 2:
                break
            await asyncio.sleep(0.01)
        assert server.closed == 2  # the cancelled request's connection was closed
        client.close()


@pytest.mark.parametrize("http_client", HTTP_CLIENTS)
async def test_simulated_engine_chat_run(tmp_path: Path, http_client: str) -> None:
    config = RunConfig(
        target="sim",
        endpoint="chat",
        num_prompts=12,
        max_concurrency=4,
        profile="short",
        sim_args=("--time-scale", "8"),
        metrics_port=0,
        linger_s=0,
        results_dir=str(tmp_path),
        http_client=http_client,
    )
    result = await run_benchmark(config, progress=False)
    assert result.summary["requests"]["ok"] == 12
    assert result.summary["token_count"] == "usage"
    assert result.summary["total_output_tokens"] == 12 * 64
    lines = [json.loads(x) for x in (result.result_dir / "requests.jsonl").read_text().splitlines()]
    assert len({len(x["itl_s"]) for x in lines}) == 1  # every stream framed alike
    assert len(lines[0]["itl_s"]) >= 63


@pytest.mark.parametrize("c_writer", [False, True], ids=["waker thread", "C writer"])
async def test_waker_thread_writes_at_the_send_time_and_never_after_a_cancel(c_writer: bool) -> None:
    """Written at the send time by the waker thread, or by the C writer where it is built (the
    default: `PreciseWaker.post_write`), stamped right after; never written once cancelled."""
    body = b"".join(_chunk(m) for m in _sse(2))
    server = Scripted(writes(HEAD_CHUNKED + body + b"0\r\n\r\n"), writes(HEAD_CHUNKED + body + b"0\r\n\r\n"))
    waker = PreciseWaker(asyncio.get_running_loop())
    writer = waker if c_writer else None
    if c_writer and not kernel_stamps.native():
        pytest.skip("the C module is not built here")
    try:
        async with scripted(server) as url:
            client = _client(url)
            await _send(client, 0)  # a keep-alive connection to ready the next requests on
            due = time.perf_counter_ns() + 30_000_000
            record = RequestRecord(1, "run-000001", False, due, 4, 3)
            done = finalize(await client.send(record, "/v1/completions", b"{}", due, waker.post_at, writer))
            assert done.outcome == "ok"
            assert due <= done.sent_ns < due + 50_000_000  # written by the thread at the send time
            # cancelled before its send time: the thread finds the connection dropped and leaves it
            due = time.perf_counter_ns() + 60_000_000
            record = RequestRecord(2, "run-000002", False, due, 4, 3)
            task = asyncio.ensure_future(
                client.send(record, "/v1/completions", b"{}", due, waker.post_at, writer)
            )
            await asyncio.sleep(0.01)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            await asyncio.sleep(0.09)  # past the send time
            assert finalize(record).outcome == "cancelled"
            assert record.sent_ns == due  # the placeholder: never sent
            assert len(server.requests) == 2
            client.close()
    finally:
        waker.close()
