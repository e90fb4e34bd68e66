"""Issue 13 item 8: a run attaches an exporter only when it watches the run's target.

On a shared host, 127.0.0.1:9402 may be another user's exporter watching another engine; its
environment must not be recorded as this run's. Real aiohttp servers on loopback play the exporter.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
from aiohttp import web
from aiohttp.test_utils import TestServer

from loadgen.records import EngineMetadata
from loadgen.results.manifest import engine_section
from loadgen.targets.exporter_client import attach_exporter, match_engine


@asynccontextmanager
async def exporter_serving(engines: list[dict[str, Any]]) -> AsyncIterator[str]:
    async def manifest(_request: web.Request) -> web.Response:
        return web.Response(text=json.dumps({"engines": engines}), content_type="application/json")

    app = web.Application()
    app.router.add_get("/manifest", manifest)
    server = TestServer(app, host="127.0.0.1", port=0)
    await server.start_server()
    try:
        yield f"http://127.0.0.1:{server.port}"
    finally:
        await server.close()


OTHER_ENGINE = {
    "engine": "sglang",
    "url": "http://127.0.0.1:30001",
    "args": {"port": "30001", "max_running_requests": 16},
}
OUR_ENGINE = {
    "engine": "vllm",
    "url": "http://127.0.0.1:8123",
    "args": {"port": "8123", "max_num_seqs": 64},
}


async def test_exporter_watching_another_engine_is_not_attached() -> None:
    async with exporter_serving([OTHER_ENGINE]) as url, aiohttp.ClientSession() as session:
        manifest, why = await attach_exporter(session, None, "http://127.0.0.1:8123", default=url)
    assert manifest is None
    assert why.startswith("not attached")
    assert "8123" in why  # says which target it looked for
    assert "30001" in why  # and what the exporter watches instead


async def test_exporter_watching_the_target_is_attached() -> None:
    async with exporter_serving([OTHER_ENGINE, OUR_ENGINE]) as url, aiohttp.ClientSession() as session:
        manifest, source = await attach_exporter(session, None, "http://127.0.0.1:8123", default=url)
    assert manifest is not None
    assert source == f"{url}/manifest"
    meta = EngineMetadata("vllm", "0.26.0", "m", speaks="vllm")
    section = engine_section(meta, "http://127.0.0.1:8123", manifest)
    # the watched engine's command line, not the other engine's
    assert section["params"]["max_num_seqs"] == 64
    assert section["param_sources"]["max_num_seqs"] == "exporter /proc cmdline"


async def test_a_named_exporter_is_attached_even_if_it_watches_nothing_matching() -> None:
    async with exporter_serving([OTHER_ENGINE]) as url, aiohttp.ClientSession() as session:
        manifest, _source = await attach_exporter(session, url, "http://127.0.0.1:8123")
    assert manifest is not None
    # ... but its other engine never fills this run's parameters
    assert match_engine(manifest["engines"], "http://127.0.0.1:8123") is None
    section = engine_section(EngineMetadata("vllm", speaks="vllm"), "http://127.0.0.1:8123", manifest)
    assert section["param_sources"]["max_num_seqs"] == "default"


def test_match_by_flag_port_or_default_port() -> None:
    by_flag = {"engine": "sglang", "url": None, "args": {"port": "31000"}}
    by_default = {"engine": "sglang", "url": None, "args": {}}
    assert match_engine([by_flag], "http://127.0.0.1:31000") is by_flag
    assert match_engine([by_default], "http://127.0.0.1:30000") is by_default
    assert match_engine([by_flag, by_default], "http://127.0.0.1:8000") is None
