"""Engine metadata and cache flush against servers answering with the real engines' bodies
(golden captures), and the embedded simulated engine."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from loadgen.results.manifest import engine_section
from loadgen.targets import get_target
from tests.conftest import GOLDEN_SGLANG, GOLDEN_VLLM
from tests.loadgen_servers import serve

pytestmark = pytest.mark.timeout(60)


def _body(path: Path) -> tuple[int, Any]:
    raw = path.read_text()
    status = int(raw.split()[1])
    start = raw.find("\n{")
    return status, json.loads(raw[start + 1 :]) if start >= 0 else None


def _golden_app(folder: Path, routes: dict[str, str], posts: dict[str, int]) -> web.Application:
    app = web.Application()
    for route, file in routes.items():
        status, body = _body(folder / file)

        async def handler(request: web.Request, status: int = status, body: Any = body) -> web.Response:
            return web.json_response(body, status=status)

        app.router.add_get(route, handler)
    for route, status in posts.items():

        async def post(request: web.Request, status: int = status) -> web.Response:
            return web.Response(status=status, text="ok" if status == 200 else "Not Found")

        app.router.add_post(route, post)
    return app


async def test_vllm_metadata_from_real_bodies() -> None:
    routes = {
        "/version": "get_version.txt",
        "/v1/models": "get_v1_models.txt",
        "/server_info": "get_server_info.txt",
    }
    async with serve(_golden_app(GOLDEN_VLLM, routes, {})) as url, aiohttp.ClientSession() as session:
        target = get_target("vllm")
        meta = await target.fetch_metadata(session, url)
        flush = await target.flush_cache(session, url)
    assert (meta.engine, meta.version, meta.model, meta.max_model_len) == (
        "vllm",
        "0.26.0",
        "tiny-llama",
        2048,
    )
    assert meta.sources == ["/version", "/v1/models", "/server_info"]
    section = engine_section(meta, url)
    params = section["params"]
    assert section["param_sources"]["dtype"] == "engine HTTP /server_info"
    assert params["dtype"] == "bfloat16"  # the effective dtype, not the flag default "auto"
    assert params["tensor_parallel_size"] == 1
    assert params["max_model_len"] == 2048
    assert params["prefix_caching"] is True
    assert not flush.ok
    assert "VLLM_SERVER_DEV_MODE=1" in flush.detail  # 404 outside dev mode


async def test_sglang_metadata_from_real_bodies() -> None:
    routes = {
        "/get_server_info": "get_get_server_info.txt",
        "/get_model_info": "get_get_model_info.txt",
        "/v1/models": "get_v1_models.txt",
        "/version": "get_version.txt",
    }
    app = _golden_app(GOLDEN_SGLANG, routes, {"/flush_cache": 200})
    async with serve(app) as url, aiohttp.ClientSession() as session:
        target = get_target("sglang")
        meta = await target.fetch_metadata(session, url)
        flush = await target.flush_cache(session, url)
    assert (meta.engine, meta.version, meta.model, meta.max_model_len) == (
        "sglang",
        "0.5.14",
        "tiny-llama",
        2048,
    )
    assert meta.server_args["mem_fraction_static"] == 0.5
    assert meta.server_args["model_info"]["model_type"] == "llama"
    section = engine_section(meta, url)
    assert section["params"]["gpu_memory_utilization"] == 0.5
    assert section["params"]["seed"] == 568564071  # SGLang's reported random_seed, not "auto"
    assert section["param_sources"]["seed"] == "engine HTTP /get_server_info"
    assert flush.ok
    assert flush.method == "POST /flush_cache"


@pytest.mark.parametrize("personality", ["vllm", "sglang"])
async def test_sim_target_reports_simengine(personality: str) -> None:
    from simengine.embedded import EmbeddedEngine

    engine = EmbeddedEngine(["--personality", personality, "--max-num-seqs", "32"]).start()
    try:
        async with aiohttp.ClientSession() as session:
            meta = await get_target("sim").fetch_metadata(session, engine.base_url)
    finally:
        engine.stop()
    assert meta.engine == "simengine"
    assert meta.server_args["personality"] == personality
    assert meta.version
    assert meta.model
    assert engine_section(meta, engine.base_url)["params"]["max_num_seqs"] == 32
