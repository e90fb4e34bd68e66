"""Issue 22 item 16: safe binding defaults. loadgen's live /metrics listens on loopback unless told
(`--metrics-listen-address 0.0.0.0`), and a simulated engine started with `--api-key` guards
`/v1/models` and every other /v1 route (as vLLM's middleware does), in either personality."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import psutil
import pytest

from loadgen.config import RunConfig
from loadgen.run.runner import run_benchmark
from simengine.embedded import EmbeddedEngine
from tests.integration.test_stack_listen import wait_listening
from tests.loadgen_servers import FakeEngine, free_port, serve

pytestmark = pytest.mark.timeout(90)


async def test_msgs_binding_live_metrics_default_is_loopback(tmp_path: Path) -> None:
    port = free_port()
    async with serve(FakeEngine(ttft_s=0.005, itl_s=0.001).app()) as url:
        config = RunConfig(
            target="openai",
            base_url=url,
            results_dir=str(tmp_path),
            input_len="fixed:16",
            output_len="fixed:8",
            num_prompts=20,
            rate=20.0,
            metrics_port=port,
            linger_s=1.0,
        )  # no metrics_listen_address: the default
        task = asyncio.create_task(run_benchmark(config, progress=False))
        found = await asyncio.to_thread(wait_listening, psutil.Process(), port)
        await task
    assert found == {"127.0.0.1"}


async def _status(session: aiohttp.ClientSession, url: str, token: str | None) -> int:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with session.get(url, headers=headers) as resp:
        return resp.status


@pytest.mark.parametrize(
    ("personality", "open_paths"),
    [("vllm", ["/health", "/metrics", "/version"]), ("sglang", ["/health", "/metrics", "/get_server_info"])],
)
async def test_msgs_binding_sim_api_key_guards_models(personality: str, open_paths: list[str]) -> None:
    with EmbeddedEngine(["--personality", personality, "--api-key", "sk-one", "sk-two"]) as engine:
        async with aiohttp.ClientSession() as session:
            models = f"{engine.base_url}/v1/models"
            assert await _status(session, models, None) == 401
            assert await _status(session, models, "wrong") == 401
            assert await _status(session, models, "sk-two") == 200
            for path in open_paths:  # probes and scrapes stay open, as on the real engine
                assert await _status(session, engine.base_url + path, None) == 200, path
            completions = f"{engine.base_url}/v1/completions"
            async with session.post(completions, json={"prompt": "x", "max_tokens": 1}) as resp:
                assert resp.status == 401
