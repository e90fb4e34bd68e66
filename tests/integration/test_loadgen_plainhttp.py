"""The control-plane client (loadgen.transport.plainhttp) against real servers on loopback port 0, and
a whole raw-client `loadgen run` in an interpreter where aiohttp cannot be imported at all."""

from __future__ import annotations

import asyncio
import base64
import json
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from aiohttp import web

from loadgen.transport.plainhttp import (
    ClientConnectorError,
    ClientPayloadError,
    ClientResponseError,
    PlainSession,
    ServerDisconnectedError,
    client_errors,
    error_kind,
)
from tests.loadgen_servers import FakeEngine, ServerThread

pytestmark = pytest.mark.timeout(60)
REPO = Path(__file__).resolve().parents[2]


class OneReplyServer:
    """A TCP server on 127.0.0.1 port 0 that answers each connection with fixed bytes, then closes;
    `requests` holds what each connection sent."""

    def __init__(self, reply: bytes) -> None:
        self.reply, self.requests = reply, list[bytes]()
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                self.requests.append(conn.recv(65536))
                conn.sendall(self.reply)

    def close(self) -> None:
        self.sock.close()


def _get(url: str, **kwargs: object) -> tuple[int, bytes]:
    async def go() -> tuple[int, bytes]:
        async with PlainSession(headers={"X-Session": "s"}) as session, session.get(url, **kwargs) as resp:
            return resp.status, await resp.read()

    return asyncio.run(go())


def test_framings_statuses_and_json_against_aiohttp_web() -> None:
    async def chunked(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse()
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        for part in (b'{"a": ', b"[1, 2]", b"}"):
            await resp.write(part)
        await resp.write_eof()
        return resp

    async def echo(request: web.Request) -> web.Response:
        body = await request.json()
        return web.json_response({"got": body, "session": request.headers.get("X-Session")}, status=201)

    async def missing(_: web.Request) -> web.Response:
        return web.Response(status=404, text="no such thing")

    app = web.Application()
    app.router.add_get("/chunked", chunked)
    app.router.add_post("/echo", echo)
    app.router.add_get("/missing", missing)
    with ServerThread(lambda: app) as server:
        assert _get(f"{server.base_url}/chunked") == (200, b'{"a": [1, 2]}')
        assert _get(f"{server.base_url}/missing", timeout=5.0) == (404, b"no such thing")

        async def post() -> tuple[int, object]:
            async with (
                PlainSession({"X-Session": "s"}) as s,
                s.post(f"{server.base_url}/echo", json=[3]) as r,
            ):
                return r.status, await r.json()

        assert asyncio.run(post()) == (201, {"got": [3], "session": "s"})


def test_basic_auth_from_the_url_and_the_request_line() -> None:
    server = OneReplyServer(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
    try:
        assert _get(f"http://user:p%40ss@127.0.0.1:{server.port}/manifest?x=1") == (200, b"ok")
    finally:
        server.close()
    sent = server.requests[0].decode()
    assert sent.startswith("GET /manifest?x=1 HTTP/1.1\r\n")
    assert f"Host: 127.0.0.1:{server.port}\r\n" in sent  # no credentials in the Host field
    assert "Authorization: Basic " + base64.b64encode(b"user:p@ss").decode() in sent
    assert "X-Session: s\r\n" in sent


@pytest.mark.parametrize(
    ("reply", "error", "kind"),
    [
        (b"", ServerDisconnectedError, "disconnected"),
        (b"SSH-2.0-OpenSSH_9.6\r\n\r\n", ClientResponseError, "response"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", ClientResponseError, "response"),
        (b'HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{"data"', ClientPayloadError, "payload"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", ClientPayloadError, "payload"),
    ],
)
def test_broken_answers_raise_the_named_errors(reply: bytes, error: type[Exception], kind: str) -> None:
    server = OneReplyServer(reply)
    try:
        with pytest.raises(error) as caught:
            _get(f"http://127.0.0.1:{server.port}/v1/models")
    finally:
        server.close()
    assert isinstance(caught.value, client_errors())
    assert error_kind(caught.value) == kind


def test_a_refused_connection_names_host_port_and_cause() -> None:
    with socket.socket() as probe:  # a port nobody listens on: bound, never listening
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        with pytest.raises(ClientConnectorError) as caught:
            _get(f"http://127.0.0.1:{port}/")
    assert isinstance(caught.value.os_error, ConnectionRefusedError)
    assert str(caught.value).startswith(f"Cannot connect to host 127.0.0.1:{port} ssl:default [")
    assert error_kind(caught.value) == "connect"


def test_a_silent_server_times_out() -> None:
    with socket.create_server(("127.0.0.1", 0)) as quiet, pytest.raises(TimeoutError):  # never answers
        _get(f"http://127.0.0.1:{quiet.getsockname()[1]}/", timeout=0.2)


def test_a_raw_client_run_never_imports_aiohttp(tmp_path: Path) -> None:
    engine = FakeEngine(ttft_s=0.001, itl_s=0.001)
    with ServerThread(engine.app) as server:
        args = ["run", "--target", "openai", "--base-url", server.base_url, "--num-prompts", "5"]
        args += ["--rate", "50", "--output-len", "fixed:4", "--quiet", "--json", "--linger", "0"]
        args += ["--metrics-port", "0", "--results-dir", str(tmp_path), "--exporter-url", server.base_url]
        code = (
            "import sys; sys.modules['aiohttp'] = None\n"  # any import of aiohttp fails
            "from loadgen.cli.main import main\n"
            f"sys.argv = ['loadgen', *{args!r}]\n"
            "main()\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=50
        )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["requests"]["ok"] == 5
    assert len(engine.streams) == 5
