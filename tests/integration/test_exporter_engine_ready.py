"""Answering vs ready, and a slow optional endpoint: an SGLang stand-in on loopback (issue 13 item 1).

The stand-in serves SGLang 0.5.14's captured `/get_server_info` and `/v1/models`; its server-info
endpoint can be told to stall 2 s (it goes through SGLang's scheduler, slow under load or warm-up)
while `/health` and `/v1/models` keep answering at once.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from click.testing import CliRunner
from prometheus_client import CollectorRegistry

from exporter.checks import engine_checks
from exporter.collectors.base import CollectorSet
from exporter.collectors.engine import EngineCollector
from exporter.engines import EngineInspector, EngineReport
from loadgen.cli.preflight import preflight
from tests.conftest import GOLDEN_SGLANG

STALL_S = 2.0
TIMEOUT_S = 0.5


def _body(name: str) -> str:
    return (GOLDEN_SGLANG / name).read_text().partition("\n\n")[2]


@dataclass
class StandIn:
    """The running stand-in: its URL and the switches a test flips."""

    url: str
    state: dict[str, object]


def stand_in_app(state: dict[str, object]) -> web.Application:
    """/health (status from `state`), /v1/models, /get_server_info (stalls when `state["stall"]`)."""
    info, models = _body("get_get_server_info.txt"), _body("get_v1_models.txt")

    async def health(_r: web.Request) -> web.Response:
        return web.Response(status=int(str(state["health"])))

    async def server_info(_r: web.Request) -> web.Response:
        if state["stall"]:
            await asyncio.sleep(STALL_S)
        return web.Response(text=info, content_type="application/json")

    async def v1_models(_r: web.Request) -> web.Response:
        return web.Response(text=models, content_type="application/json")

    app = web.Application()
    app.router.add_get("/health", health)
    app.router.add_get("/get_server_info", server_info)
    app.router.add_get("/v1/models", v1_models)
    return app


@pytest.fixture
async def stand_in() -> AsyncIterator[StandIn]:
    state: dict[str, object] = {"stall": False, "health": 200}
    server = TestServer(stand_in_app(state), host="127.0.0.1", port=0)
    await server.start_server()
    try:
        yield StandIn(f"http://127.0.0.1:{server.port}", state)
    finally:
        await server.close()


async def inspect(inspector: EngineInspector) -> tuple[EngineReport, float]:
    """One fresh report (polled off the event loop the stand-in runs on) and how long it took."""
    started = time.monotonic()
    reports = await asyncio.get_running_loop().run_in_executor(None, lambda: inspector.reports(fresh=True))
    assert len(reports) == 1
    return reports[0], time.monotonic() - started


def gauges(inspector: EngineInspector, report: EngineReport) -> tuple[float | None, float | None]:
    """infergauge_engine_up and _ready as a scrape shows them."""
    registry = CollectorRegistry()
    registry.register(CollectorSet([EngineCollector(inspector)]))
    labels = {"engine": report.engine, "url": report.url or "", "model": report.model or ""}
    return (
        registry.get_sample_value("infergauge_engine_up", labels),
        registry.get_sample_value("infergauge_engine_ready", labels),
    )


async def test_stalled_server_info_keeps_engine_up_ready_and_version_marked_stale(stand_in: StandIn) -> None:
    inspector = EngineInspector([stand_in.url], discover=False, http_timeout_s=TIMEOUT_S, cache_s=60)
    first, _ = await inspect(inspector)
    assert (first.up, first.ready, first.version, first.stale) == (True, True, "0.5.14", {})

    stand_in.state["stall"] = True
    report, took = await inspect(inspector)
    assert took < STALL_S  # the stalled endpoint cost one timeout, not the stall
    assert (report.engine, report.up, report.ready) == ("sglang", True, True)
    assert report.version == "0.5.14"  # kept from the last answer ...
    assert set(report.stale) == {"version", "server_info"}  # ... and marked stale, with its age
    assert report.stale["version"] >= TIMEOUT_S
    assert report.params["gpu_memory_utilization"] == 0.5  # still the engine's own value
    assert gauges(inspector, report) == (1.0, 1.0)
    checks = {c["id"] for c in engine_checks([report.as_dict()], [stand_in.url])}
    assert "engine_down" not in checks  # loadgen preflight must not exit 1 here

    stand_in.state["stall"] = False
    recovered, _ = await inspect(inspector)
    assert (recovered.version, recovered.stale) == ("0.5.14", {})


async def test_stalled_on_first_poll_is_still_answering(stand_in: StandIn) -> None:
    stand_in.state["stall"] = True
    inspector = EngineInspector([stand_in.url], discover=False, http_timeout_s=TIMEOUT_S)
    report, _ = await inspect(inspector)
    assert (report.engine, report.up, report.ready, report.stale) == ("sglang", True, True, {})
    checks = {c["id"] for c in engine_checks([report.as_dict()], [stand_in.url])}
    assert "engine_down" not in checks


async def test_answering_but_not_ready(stand_in: StandIn) -> None:
    stand_in.state["health"] = 503  # what SGLang 0.5.14 said while starting (golden get_health.txt)
    inspector = EngineInspector([stand_in.url], discover=False, http_timeout_s=TIMEOUT_S)
    report, _ = await inspect(inspector)
    assert (report.up, report.ready) == (True, False)
    assert gauges(inspector, report) == (1.0, 0.0)
    checks = {c["id"]: c["severity"] for c in engine_checks([report.as_dict()], [stand_in.url])}
    assert checks.get("engine_not_ready") == "warning"
    assert "engine_down" not in checks


def test_silent_listener_is_neither_answering_nor_ready() -> None:
    # accepts connections (the kernel's backlog) but never answers: not answering, not ready, up 0
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        inspector = EngineInspector([url], discover=False, http_timeout_s=TIMEOUT_S)
        report = inspector.reports(fresh=True)[0]
    assert (report.up, report.ready) == (False, False)
    checks = {c["id"] for c in engine_checks([report.as_dict()], [url])}
    assert "engine_down" in checks


async def test_scrape_does_not_wait_for_a_slow_endpoint(stand_in: StandIn) -> None:
    inspector = EngineInspector([stand_in.url], discover=False, http_timeout_s=TIMEOUT_S, cache_s=0)
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, inspector.reports)  # never read: read now
    stand_in.state["stall"] = True
    started = time.monotonic()
    await loop.run_in_executor(None, inspector.reports)  # expired: last reading, refreshed behind
    assert time.monotonic() - started < TIMEOUT_S / 2
    report, _ = await inspect(inspector)  # waits for the background refresh, then reads again
    assert set(report.stale) == {"version", "server_info"}


class _StallingSGLang(BaseHTTPRequestHandler):
    """The stand-in over http.server (for the synchronous CLI): /get_server_info always stalls."""

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        if self.path == "/get_server_info":
            time.sleep(STALL_S)
        body = {"/health": "", "/v1/models": _body("get_v1_models.txt")}.get(self.path)
        try:
            self.send_response(404 if body is None else 200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write((body or "").encode())
        except (BrokenPipeError, ConnectionResetError):  # the client gave up on the stall: as it should
            return

    def log_message(self, *args: object) -> None:
        return None


def test_preflight_does_not_call_a_slow_engine_down() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _StallingSGLang)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}"
        result = CliRunner().invoke(preflight, ["--engine-url", url, "--json"])
    finally:
        server.shutdown()
    manifest = json.loads(result.stdout)  # stdout alone: a busy host's stray thread output stays out
    (engine,) = [e for e in manifest["engines"] if e["url"] == url]
    assert (engine["engine"], engine["up"], engine["ready"]) == ("sglang", True, True)
    assert "engine_down" not in {c["id"] for c in manifest["checks"]}
