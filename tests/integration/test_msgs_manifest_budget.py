"""Issue 22 item 18: the exporter's /manifest answers within its budget from the facts it has.

Before, every /manifest re-read the engines and waited on SGLang's generating /health (up to 5 s),
while loadgen allows the default exporter 1 s: every real SGLang run recorded no exporter. Here an
SGLang stand-in (its captured bodies) stalls /health; the first reading is awaited once, later
/manifest calls answer from it, marked with `facts_age_s` and an `engine_facts_stale` check.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from exporter.app import Exporter, ExporterConfig, build_app
from exporter.collectors.engine import MANIFEST_BUDGET_S
from tests.integration.test_exporter_engine_ready import StandIn, _body

pytestmark = pytest.mark.timeout(90)
HEALTH_STALL_S = 3.0  # SGLang's /health generates a token: slow under load (its timeout is 5 s)


@pytest.fixture
async def slow_health() -> AsyncIterator[StandIn]:
    """SGLang 0.5.14's captured /get_server_info and /v1/models; /health stalls when told."""
    state: dict[str, object] = {"stall": False}
    info, models = _body("get_get_server_info.txt"), _body("get_v1_models.txt")

    async def health(_r: web.Request) -> web.Response:
        if state["stall"]:
            await asyncio.sleep(HEALTH_STALL_S)
        return web.Response(status=200)

    async def json_body(request: web.Request) -> web.Response:
        text = info if request.path == "/get_server_info" else models
        return web.Response(text=text, content_type="application/json")

    app = web.Application()
    app.router.add_get("/health", health)
    app.router.add_get("/get_server_info", json_body)
    app.router.add_get("/v1/models", json_body)
    server = TestServer(app, host="127.0.0.1", port=0)
    await server.start_server()
    try:
        yield StandIn(f"http://127.0.0.1:{server.port}", state)
    finally:
        await server.close()


async def _manifest(session: aiohttp.ClientSession, url: str) -> tuple[dict, float]:
    started = time.monotonic()
    async with session.get(f"{url}/manifest") as resp:
        body = json.loads(await resp.read())
    return body, time.monotonic() - started


async def test_msgs_manifest_answers_within_budget_from_stale_facts(slow_health: StandIn) -> None:
    config = ExporterConfig(collectors=("engine",), engine_urls=[slow_health.url], discover=False)
    exporter = Exporter(config)
    server = TestServer(build_app(exporter, None), host="127.0.0.1", port=0)
    await server.start_server()
    url = f"http://127.0.0.1:{server.port}"
    try:
        async with aiohttp.ClientSession() as session:
            first, _ = await _manifest(session, url)  # nothing read yet: the first reading is awaited
            (engine,) = first["engines"]
            assert (engine["engine"], engine["version"], engine["facts_age_s"]) == ("sglang", "0.5.14", 0.0)

            slow_health.state["stall"] = True
            await asyncio.sleep(0.2)
            stale, took = await _manifest(session, url)
    finally:
        await server.close()
    assert took < HEALTH_STALL_S / 2, took  # did not wait for /health (before: >= the stall)
    (engine,) = stale["engines"]
    assert (engine["engine"], engine["version"]) == ("sglang", "0.5.14")  # the facts it has
    assert engine["params"]["max_num_seqs"] == first["engines"][0]["params"]["max_num_seqs"]
    assert engine["facts_age_s"] > 0.0  # ... with their age
    (check,) = [c for c in stale["checks"] if c["id"] == "engine_facts_stale"]
    assert f"within the manifest's {MANIFEST_BUDGET_S:g} s budget" in check["message"]
