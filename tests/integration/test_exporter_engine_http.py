"""Polling engines over HTTP, replaying the real vLLM 0.26.0 and SGLang 0.5.14 answers from loopback."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from aiohttp import web
from aiohttp.test_utils import TestServer
from prometheus_client import CollectorRegistry

from exporter.collectors.base import CollectorSet
from exporter.collectors.engine import EngineCollector
from exporter.engine_http import EngineHttpFacts, poll_engine
from exporter.engines import EngineInspector
from infergauge.engines import get
from infergauge.engines.resolve import resolve
from tests.conftest import GOLDEN_SGLANG, GOLDEN_VLLM


def replay_app(folder: Path) -> web.Application:
    """Serve every golden `get_<path>.txt` capture byte for byte (status and body)."""
    app = web.Application()
    for capture in folder.glob("get_*.txt"):
        head, _, body = capture.read_text().partition("\n\n")
        status = int(head.split()[1])
        path = "/" + capture.stem.removeprefix("get_")
        if path == "/v1_models":
            path = "/v1/models"

        async def handler(_r: web.Request, status: int = status, body: str = body) -> web.Response:
            return web.Response(status=status, text=body, content_type="application/json")

        app.router.add_get(path, handler)
    idle = (folder / "metrics_0_idle.txt").read_text().partition("\n\n")[2]

    async def metrics(_r: web.Request) -> web.Response:
        return web.Response(text=idle, content_type="text/plain")

    app.router.add_get("/metrics", metrics)
    return app


async def poll(folder: Path) -> EngineHttpFacts:
    server = TestServer(replay_app(folder), host="127.0.0.1", port=0)
    await server.start_server()
    try:
        url = f"http://127.0.0.1:{server.port}"
        return await asyncio.get_running_loop().run_in_executor(None, poll_engine, url, 2.0, None)
    finally:
        await server.close()


async def test_vllm_answers() -> None:
    facts = await poll(GOLDEN_VLLM)
    assert facts.up is True
    assert facts.engine == "vllm"
    assert facts.version == "0.26.0"
    assert facts.model == "tiny-llama"
    assert facts.max_model_len == 2048


async def test_sglang_answers_without_version_endpoint() -> None:
    facts = await poll(GOLDEN_SGLANG)  # /version is 404 in 0.5.14; the version is in /get_server_info
    assert facts.up is True
    assert facts.engine == "sglang"
    assert facts.version == "0.5.14"
    resolved = resolve(get("sglang"), server_info=facts.server_info, server_info_path=facts.server_info_path)
    params = resolved.params
    assert resolved.param_sources["gpu_memory_utilization"] == "engine HTTP /get_server_info"
    assert params["gpu_memory_utilization"] == 0.5
    assert params["max_model_len"] == 2048
    assert params["max_num_batched_tokens"] == 8192  # chunked_prefill_size the server resolved


def test_unreachable_engine_costs_one_attempt() -> None:
    started = time.monotonic()
    facts = poll_engine("http://127.0.0.1:9", timeout_s=1.0)
    assert facts.up is False
    assert facts.version is None
    assert time.monotonic() - started < 1.0  # refused at once, and not retried per endpoint


async def info_labels(folder: Path) -> dict[str, str]:
    """The `infergauge_engine_info` labels a scrape shows for a replayed engine named by URL."""
    server = TestServer(replay_app(folder), host="127.0.0.1", port=0)
    await server.start_server()
    try:
        inspector = EngineInspector([f"http://127.0.0.1:{server.port}"], discover=False, http_timeout_s=2.0)
        registry = CollectorRegistry()
        registry.register(CollectorSet([EngineCollector(inspector)]))
        families = await asyncio.get_running_loop().run_in_executor(None, lambda: list(registry.collect()))
    finally:
        await server.close()
    (sample,) = [s for f in families if f.name == "infergauge_engine_info" for s in f.samples]
    return dict(sample.labels)


async def test_info_labels_carry_the_effective_values_sglang_reports() -> None:
    labels = await info_labels(GOLDEN_SGLANG)
    info = json.loads((GOLDEN_SGLANG / "get_get_server_info.txt").read_text().partition("\n\n")[2])
    assert info["max_running_requests"] is None  # the flag said null (SGLang sizes it), the seed auto
    assert labels["seed"] == str(info["random_seed"])
    assert labels["max_num_seqs"] == str(info["internal_states"][0]["effective_max_running_requests_per_dp"])
    assert labels["gpu_memory_utilization"] == "0.5"


async def test_info_labels_carry_the_dtype_vllm_runs_with() -> None:
    labels = await info_labels(GOLDEN_VLLM)  # dev-mode /server_info: dtype=torch.bfloat16
    assert labels["dtype"] == "bfloat16"  # not the flag's default "auto"
    assert labels["max_model_len"] == "2048"
    # vllm:cache_config_info{gpu_memory_utilization="0.5",block_size="16"} on its /metrics: what it runs
    # with (--gpu-memory-utilization 0.5 was on the launch line; the default would say 0.9)
    assert labels["gpu_memory_utilization"] == "0.5"
    assert labels["block_size"] == "16"


async def test_vllm_decided_values_come_from_its_cache_config_info() -> None:
    facts = await poll(GOLDEN_VLLM)
    assert facts.reported["gpu_memory_utilization"] == 0.5
    resolved = resolve(get("vllm"), cmdline={}, reported=facts.reported)
    source = "engine HTTP /metrics vllm:cache_config_info"
    assert (resolved.params["gpu_memory_utilization"], resolved.param_sources["gpu_memory_utilization"]) == (
        0.5,
        source,
    )
    assert resolved.param_sources["block_size"] == source
    assert resolved.params["kv_cache_dtype"] == "auto"  # cache_dtype="auto": nothing more concrete said
