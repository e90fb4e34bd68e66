"""Purpose-built loopback servers for testing the load generator (reusable by other parts).

- `FakeEngine`: an OpenAI-style streaming server with exact timing (TTFT, ITL) that stamps the real
  send time of every chunk (`perf_counter_ns()` after the write) and can misbehave per request
  following a `plan` (ok, http_error, stall, disconnect, malformed, no_usage, no_done).
- `golden_replay_app`: replays a real engine's SSE bytes with their recorded read timing.
- `serve(app)`: async context manager binding 127.0.0.1 port 0; `ServerThread(app)` does the same
  in a background thread for synchronous callers (CLI tests).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from loadgen.config import RunConfig

SENT: web.AppKey[list[list[int]]] = web.AppKey("sent", list)  # golden replay: write stamps per request
# ... and the stamps taken right before each write (a kernel receive stamp falls inside the write)
SENT_START: web.AppKey[list[list[int]]] = web.AppKey("sent_start", list)
BEHAVIOURS = ("ok", "http_error", "stall", "disconnect", "malformed", "no_usage", "no_done")


@dataclass
class SentStream:
    """What the server really did for one request (perf_counter ns after each write)."""

    x_request_id: str | None
    body: dict[str, Any]
    headers: dict[str, str]
    arrival_ns: int
    token_send_ns: list[int] = field(default_factory=list)
    token_write_ns: list[int] = field(default_factory=list)  # right before each token's write
    behaviour: str = "ok"


@dataclass
class FakeEngine:
    """Configurable streaming server; `streams` lists every request it received, in order."""

    ttft_s: float = 0.02
    itl_s: float = 0.005
    model: str = "fake-model"
    plan: list[str] = field(default_factory=lambda: ["ok"])
    http_status: int = 500
    streams: list[SentStream] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._plan = itertools.cycle(self.plan)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/completions", self.handle)
        app.router.add_post("/v1/chat/completions", self.handle)
        app.router.add_get("/v1/models", self.models)
        for path, body in self.metadata.items():
            app.router.add_get(path, _json_handler(body))
        return app

    async def models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": self.model, "max_model_len": 4096}]})

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        rec = SentStream(
            request.headers.get("X-Request-Id"), body, dict(request.headers), time.perf_counter_ns()
        )
        rec.behaviour = next(self._plan)
        self.streams.append(rec)
        if rec.behaviour == "http_error":
            return web.json_response(
                {"error": {"message": "injected failure", "code": self.http_status}}, status=self.http_status
            )
        chat = request.path.endswith("chat/completions")
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        n = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
        await asyncio.sleep(self.ttft_s)
        for i in range(n):
            if i:
                await asyncio.sleep(self.itl_s)
            if rec.behaviour == "stall" and i == 1:
                await asyncio.sleep(3600)
            if rec.behaviour == "disconnect" and i == n // 2:
                assert request.transport is not None
                request.transport.close()
                return resp
            if rec.behaviour == "malformed" and i == n // 2:
                await resp.write(b"data: {not json\n\n")
                continue
            rec.token_write_ns.append(time.perf_counter_ns())
            await resp.write(_chunk(self.model, chat, f" tok{i}"))
            rec.token_send_ns.append(time.perf_counter_ns())
        if rec.behaviour != "no_usage":
            prompt = body.get("prompt")
            p_tokens = (
                len(prompt) if isinstance(prompt, list) else len(str(prompt or body.get("messages")).split())
            )
            usage = {"prompt_tokens": p_tokens, "completion_tokens": n, "total_tokens": p_tokens + n}
            await resp.write(_sse({"id": "x", "choices": [], "usage": usage}))
        if rec.behaviour != "no_done":
            await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp


def _sse(obj: Any) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def _chunk(model: str, chat: bool, text: str) -> bytes:
    choice: dict[str, Any] = {"index": 0, "finish_reason": None}
    if chat:
        choice["delta"] = {"content": text}
    else:
        choice["text"] = text
    return _sse({"id": "x", "object": "chunk", "model": model, "choices": [choice]})


def _json_handler(body: Any) -> Callable[[web.Request], Any]:
    async def handler(request: web.Request) -> web.Response:
        return web.json_response(body)

    return handler


def golden_body(sse_file: Path) -> tuple[bytes, list[tuple[int, int]]]:
    """(body bytes without the HTTP head, [(t_ns after send, n bytes)]) of a golden SSE capture."""
    raw = sse_file.read_bytes()
    cut = raw.find(b"\r\n\r\n")
    body = raw[cut + 4 :] if cut >= 0 else raw[raw.find(b"\n\n") + 2 :]
    timing_file = sse_file.with_name(sse_file.name.replace(".txt", ".timing.jsonl"))
    reads = [json.loads(line) for line in timing_file.read_text().splitlines() if line.strip()]
    return body, [(int(r["t_ns"]), int(r["bytes"])) for r in reads]


def golden_replay_app(
    sse_file: Path, models_body: dict[str, Any], time_scale: float = 1.0
) -> web.Application:
    """Serve the golden SSE bytes on both POST endpoints, each read at its recorded time / time_scale."""
    body, reads = golden_body(sse_file)
    sent: list[list[int]] = []
    sent_start: list[list[int]] = []

    async def handle(request: web.Request) -> web.StreamResponse:
        await request.read()
        start = time.perf_counter_ns()
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream; charset=utf-8"})
        await resp.prepare(request)
        stamps, starts, pos = [], [], 0
        for t_ns, n in reads:
            delay = start + t_ns / time_scale - time.perf_counter_ns()
            if delay > 0:
                await asyncio.sleep(delay / 1e9)
            starts.append(time.perf_counter_ns())
            await resp.write(body[pos : pos + n])
            stamps.append(time.perf_counter_ns())
            pos += n
        sent.append(stamps)
        sent_start.append(starts)
        await resp.write_eof()
        return resp

    app = web.Application()
    app.router.add_post("/v1/completions", handle)
    app.router.add_post("/v1/chat/completions", handle)
    app.router.add_get("/v1/models", _json_handler(models_body))
    app[SENT] = sent
    app[SENT_START] = sent_start
    return app


@contextlib.asynccontextmanager
async def serve(app: web.Application) -> AsyncIterator[str]:
    """Run `app` on 127.0.0.1, port chosen by the OS; yields the base URL."""
    runner = web.AppRunner(app, access_log=None, handler_cancellation=True, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    server = site._server
    assert server is not None
    port = server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


class ServerThread:
    """`serve(app)` in a daemon thread with its own loop, for synchronous tests (context manager)."""

    def __init__(self, app_factory: Callable[[], web.Application]) -> None:
        self.app_factory = app_factory
        self.base_url = ""
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        async with serve(self.app_factory()) as url:
            self.base_url = url
            self._ready.set()
            await self._stop.wait()

    def __enter__(self) -> ServerThread:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("test server did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._loop is not None
        assert self._stop is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)


def loadgen_process(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """`loadgen ARGS` in its own process (stdout and stderr captured as text)."""
    cmd = [sys.executable, "-m", "loadgen.cli.main", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)


def plain_run_args(base_url: str, results_dir: Path, prompts: int, rate: int, output_len: int) -> list[str]:
    """`loadgen run` arguments of a quiet plain run against a test server: `--json` summary on stdout,
    no /metrics port, no linger, no exporter, results in `results_dir`."""
    args = ["run", "--target", "openai", "--base-url", base_url, "--num-prompts", str(prompts)]
    args += ["--rate", str(rate), "--output-len", f"fixed:{output_len}", "--quiet", "--json", "--linger", "0"]
    return [*args, "--metrics-port", "0", "--results-dir", str(results_dir), "--exporter-url", "none"]


def free_port() -> int:
    """A TCP port free right now on 127.0.0.1 (for --metrics-port in tests)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def loopback_config(base_url: str, tmp_path: Path, **kw: Any) -> RunConfig:
    """A loadgen run against a test server: openai target, no /metrics port, no linger, results in
    `tmp_path`, 16-token prompts and 8-token answers; `kw` overrides any of it."""
    defaults: dict[str, Any] = {
        "target": "openai",
        "base_url": base_url,
        "metrics_port": 0,
        "linger_s": 0.0,
        "results_dir": str(tmp_path),
        "input_len": "fixed:16",
        "output_len": "fixed:8",
    }
    return RunConfig(**{**defaults, **kw})
