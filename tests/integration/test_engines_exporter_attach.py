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


async def test_a_named_exporter_watching_another_engine_is_not_attached_either() -> None:
    # issue 22 item 17: before, a named exporter was attached whatever it watched, and its other
    # engine's facts became causes in diffs (`exporter.engines: 93 -> 0`)
    async with exporter_serving([OTHER_ENGINE]) as url, aiohttp.ClientSession() as session:
        manifest, why = await attach_exporter(session, url, "http://127.0.0.1:8123")
    assert manifest is None
    assert why.startswith(f"not attached: the exporter at {url}/manifest watches no engine at")
    section = engine_section(EngineMetadata("vllm", speaks="vllm"), "http://127.0.0.1:8123", None)
    assert section["params"]["max_num_seqs"] is None  # unknown: not the other engine's 16, not 'auto'
    assert section["param_sources"]["max_num_seqs"].startswith("unknown")


async def test_only_the_watched_engine_is_recorded() -> None:
    async with exporter_serving([OTHER_ENGINE, OUR_ENGINE]) as url, aiohttp.ClientSession() as session:
        manifest, _source = await attach_exporter(session, url, "http://127.0.0.1:8123")
    assert manifest is not None
    assert manifest["engines"] == [OUR_ENGINE]  # the other engine's facts never reach the run


def test_an_engine_on_another_host_is_not_the_target() -> None:
    remote = {"engine": "vllm", "url": "http://10.0.0.5:8123", "args": {"port": "8123"}}
    assert match_engine([remote], "http://10.0.0.7:8123") is None
    assert match_engine([remote], "http://10.0.0.5:8123") is remote
    local = {"engine": "vllm", "url": "http://localhost:8123", "args": {}}
    assert match_engine([local], "http://127.0.0.1:8123") is local


def test_match_by_flag_port_or_default_port() -> None:
    by_flag = {"engine": "sglang", "url": None, "args": {"port": "31000"}}
    by_default = {"engine": "sglang", "url": None, "args": {}}
    assert match_engine([by_flag], "http://127.0.0.1:31000") is by_flag
    assert match_engine([by_default], "http://127.0.0.1:30000") is by_default
    assert match_engine([by_flag, by_default], "http://127.0.0.1:8000") is None
