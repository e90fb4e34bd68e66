"""Each personality's metadata endpoints and /metrics against the golden captures of the real engines."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client.parser import text_string_to_metric_families

from simengine.app import build_app
from simengine.config import parse_args
from tests.conftest import GOLDEN_SGLANG, GOLDEN_VLLM
from tests.integration.test_sim_api import golden_body, shape

FAST = ["--time-scale", "20", "--served-model-name", "tiny-llama", "--max-model-len", "2048"]
# The versions of the golden captures: `--engine-version` selects the /metrics layout they pin (the
# newer source layouts are pinned by tests/unit/test_sim_metric_names.py).
CAPTURED = {"vllm": "0.26.0", "sglang": "0.5.14"}

# Names dashboards and rules rely on, pinned for vLLM (0.26.0 capture) and SGLang (0.5.14 capture).
VLLM_PINNED = [
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:kv_cache_usage_perc",
    "vllm:prefix_cache_queries_total",
    "vllm:prefix_cache_hits_total",
    "vllm:prompt_tokens_total",
    "vllm:generation_tokens_total",
    "vllm:num_preemptions_total",
    "vllm:request_success_total",
    "vllm:time_to_first_token_seconds",
    "vllm:inter_token_latency_seconds",
    "vllm:e2e_request_latency_seconds",
    "vllm:request_queue_time_seconds",
    "vllm:request_time_per_output_token_seconds",
    "vllm:cache_config_info",
    "vllm:iteration_tokens_total",
    "vllm:request_prompt_tokens",
    "vllm:request_generation_tokens",
]
SGLANG_PINNED = [
    "sglang:num_running_reqs",
    "sglang:num_queue_reqs",
    "sglang:token_usage",
    "sglang:cache_hit_rate",
    "sglang:gen_throughput",
    "sglang:time_to_first_token_seconds",
    "sglang:e2e_request_latency_seconds",
    "sglang:inter_token_latency_seconds",
    "sglang:prompt_tokens_total",
    "sglang:generation_tokens_total",
    "sglang:num_requests_total",
    "sglang:cached_tokens_total",
    "sglang:queue_time_seconds",
    "sglang:kv_used_tokens",
    "sglang:utilization",
    "sglang:max_total_num_tokens",
]


def headers_and_families(text: str) -> dict[str, tuple[str, str]]:
    """metric family name -> (TYPE, HELP) from exposition text."""
    helps = dict(re.findall(r"^# HELP (\S+) (.*)$", text, re.M))
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))
    return {name: (types[name], helps.get(name, "")) for name in types}


def sample_labels(text: str) -> dict[str, set[str]]:
    """sample name -> label names (without le)."""
    out: dict[str, set[str]] = {}
    for name, labels in re.findall(r"^([a-zA-Z_:][\w:]*)\{([^}]*)\}", text, re.M):
        out.setdefault(name, set()).update(k for k in re.findall(r'(\w+)="', labels) if k != "le")
    return out


async def _client(*flags: str) -> TestClient:  # type: ignore[type-arg]
    client = TestClient(TestServer(build_app(parse_args([*FAST, *flags])), host="127.0.0.1", port=0))
    await client.start_server()
    return client


async def _load(client: TestClient, n: int = 4, prompt: Any = "shared words " * 40) -> None:  # type: ignore[type-arg]
    async def one(i: int) -> None:
        resp = await client.post(
            "/v1/completions",
            json={"prompt": prompt, "max_tokens": 8 + i, "ignore_eos": True, "stream": True},
        )
        await resp.read()

    await asyncio.gather(*(one(i) for i in range(n)))


@pytest.mark.parametrize(
    ("personality", "golden", "pinned"),
    [("vllm", GOLDEN_VLLM, VLLM_PINNED), ("sglang", GOLDEN_SGLANG, SGLANG_PINNED)],
)
async def test_metrics_names_types_help_and_labels_match_the_golden(
    personality: str, golden: Path, pinned: list[str]
) -> None:
    client = await _client("--personality", personality, "--engine-version", CAPTURED[personality])
    try:
        await _load(client)
        await _load(client, n=1)  # the same prompt again: prefix-cache hits (SGLang's cached_tokens_total)
        resp = await client.get("/metrics")
        text = await resp.text()
    finally:
        await client.close()
    gold_head, _ = (golden / "metrics_2_after.txt").read_text(encoding="utf-8").split("\n\n", 1)
    assert f"content-type: {resp.headers['Content-Type']}" in gold_head
    gold_text = golden_body(golden / "metrics_2_after.txt")
    ours, gold = headers_and_families(text), headers_and_families(gold_text)
    for name in pinned:
        assert name in ours, f"{name} missing"
    for name, (kind, help_text) in ours.items():
        assert name in gold, f"{name} is not a real {personality} metric"
        assert (kind, help_text) == gold[name], name
    ours_labels, gold_labels = sample_labels(text), sample_labels(gold_text)
    for name, labels in ours_labels.items():
        assert labels == gold_labels[name], name
    list(text_string_to_metric_families(text))  # parses as Prometheus text


async def test_vllm_metrics_count_what_was_served() -> None:
    client = await _client("--personality", "vllm")
    try:
        await _load(client, n=3, prompt=list(range(2, 66)))  # concurrent: admitted together, no cache hits
        await _load(client, n=1, prompt=list(range(2, 66)))  # afterwards: the 4 full blocks are cached
        families = {
            f.name: f for f in text_string_to_metric_families(await (await client.get("/metrics")).text())
        }
    finally:
        await client.close()

    def value(family: str, sample: str, **labels: str) -> float:
        for s in families[family].samples:
            if s.name == sample and all(s.labels.get(k) == v for k, v in labels.items()):
                return float(s.value)
        raise AssertionError(f"{sample} {labels} not found")

    # requests of 8, 9, 10 and 8 output tokens with 64-token prompts
    assert value("vllm:generation_tokens", "vllm:generation_tokens_total") == 35
    assert value("vllm:prompt_tokens", "vllm:prompt_tokens_total") == 4 * 64
    assert value("vllm:request_success", "vllm:request_success_total", finished_reason="length") == 4
    assert value("vllm:time_to_first_token_seconds", "vllm:time_to_first_token_seconds_count") == 4
    assert value("vllm:inter_token_latency_seconds", "vllm:inter_token_latency_seconds_count") == 35 - 4
    assert value("vllm:num_requests_running", "vllm:num_requests_running") == 0
    # 64 tokens = 4 blocks of 16, but the last prompt token is always recomputed: 3 blocks hit
    assert value("vllm:prefix_cache_hits", "vllm:prefix_cache_hits_total") == 48


async def test_vllm_metadata_endpoints_match_the_golden_shapes() -> None:
    client = await _client(
        "--personality", "vllm", "--model", "/tmp/tiny-llama", "--max-num-seqs", "96", "--dev-mode"
    )
    try:
        for path, golden in (
            ("/version", "get_version.txt"),
            ("/v1/models", "get_v1_models.txt"),
            ("/load", "get_load.txt"),
        ):
            resp = await client.get(path)
            assert resp.status == 200
            assert shape(await resp.json()) == shape(json.loads(golden_body(GOLDEN_VLLM / golden))), path
        models = await (await client.get("/v1/models")).json()
        assert models["data"][0]["max_model_len"] == 2048
        assert models["data"][0]["root"] == "/tmp/tiny-llama"
        for path in ("/health", "/ping"):
            resp = await client.get(path)
            assert resp.status == 200
            assert await resp.read() == b""
        info = await (await client.get("/server_info")).json()
        assert {"vllm_config", "vllm_env", "system_env"} <= set(info)
        assert info["vllm_env"]["VLLM_SERVER_DEV_MODE"] is True  # as real vLLM lists it in dev mode
        assert "max_seq_len=2048" in info["vllm_config"]
        assert info["server_args"]["max_num_seqs"] == 96
    finally:
        await client.close()


async def test_vllm_reset_prefix_cache_drops_cached_blocks() -> None:
    client = await _client("--personality", "vllm", "--dev-mode")
    try:
        prompt = list(range(2, 200))
        await _load(client, n=1, prompt=prompt)
        assert (await client.post("/reset_prefix_cache")).status == 200
        await _load(client, n=1, prompt=prompt)
        text = await (await client.get("/metrics")).text()
        hits = re.search(r"^vllm:prefix_cache_hits_total\{[^}]*\} (\S+)", text, re.M)
        assert hits is not None
        assert float(hits.group(1)) == 0.0
    finally:
        await client.close()


FASTAPI_NOT_FOUND = golden_body(GOLDEN_SGLANG / "get_version.txt")  # a real FastAPI 404: {"detail":...}


@pytest.mark.parametrize("flags", [(), ("--no-dev-mode",)])
async def test_default_vllm_answers_404_on_its_dev_mode_endpoints_like_real_vllm(
    flags: tuple[str, ...],
) -> None:
    client = await _client("--personality", "vllm", *flags)
    try:
        for method, path in (("GET", "/server_info"), ("POST", "/reset_prefix_cache")):
            resp = await client.request(method, path)
            assert resp.status == 404, path
            assert resp.content_type == "application/json"
            assert (await resp.text()) == FASTAPI_NOT_FOUND.strip(), path
        assert (await client.get("/version")).status == 200  # the rest of vLLM's API is there
    finally:
        await client.close()


async def test_vllm_dev_mode_serves_server_info_and_the_flush() -> None:
    client = await _client("--personality", "vllm", "--dev-mode")
    try:
        assert (await client.get("/server_info")).status == 200
        assert (await client.post("/reset_prefix_cache")).status == 200
    finally:
        await client.close()


async def test_sglang_metadata_endpoints_match_the_golden() -> None:
    client = await _client(
        "--personality", "sglang", "--model", "/tmp/tiny-llama", "--max-running-requests", "48"
    )
    try:
        gold_info = json.loads(golden_body(GOLDEN_SGLANG / "get_get_server_info.txt"))
        for path in ("/get_server_info", "/server_info"):
            info = await (await client.get(path)).json()
            assert set(gold_info) <= set(info)
            assert info["max_running_requests"] == 48
            assert info["context_length"] == 2048
            assert info["version"].startswith("0.5.")
        for path in ("/get_model_info", "/model_info"):
            ours = await (await client.get(path)).json()
            assert shape(ours) == shape(json.loads(golden_body(GOLDEN_SGLANG / "get_get_model_info.txt")))
        ours_models = await (await client.get("/v1/models")).json()
        assert shape(ours_models) == shape(json.loads(golden_body(GOLDEN_SGLANG / "get_v1_models.txt")))
        load = await (await client.get("/get_load")).json()
        assert shape(load) == shape(json.loads(golden_body(GOLDEN_SGLANG / "get_get_load.txt")))
        resp = await client.get("/version")
        assert resp.status == 404
        assert await resp.json() == {"detail": "Not Found"}
    finally:
        await client.close()


async def test_sglang_flush_cache_refuses_while_requests_run() -> None:
    client = await _client("--personality", "sglang", "--time-scale", "1")
    try:
        pending = asyncio.ensure_future(
            client.post(
                "/v1/completions", json={"prompt": "x", "max_tokens": 200, "ignore_eos": True, "stream": True}
            )
        )
        for _ in range(100):  # wait until the engine reports it running
            load = await (await client.get("/get_load")).json()
            if load[0]["num_reqs"]:
                break
            await asyncio.sleep(0.01)
        busy = await client.post("/flush_cache")
        assert busy.status == 400
        await (await pending).read()
        idle = await client.post("/flush_cache")
        assert idle.status == 200
        assert (await idle.text()).startswith("Cache flushed.")
    finally:
        await client.close()


def _family_block(text: str, family: str) -> list[str]:
    """The exposition lines of one family (HELP, TYPE, samples), `_created` values blanked."""
    lines = [
        ln
        for ln in text.splitlines()
        if ln.split("{")[0].split(" ")[0] == family
        or ln.startswith((f"# HELP {family} ", f"# TYPE {family} "))
        or ln.startswith((f"{family}_bucket", f"{family}_count", f"{family}_sum"))
    ]
    return lines


@pytest.mark.parametrize(
    ("personality", "golden", "families"),
    [
        (
            "vllm",
            GOLDEN_VLLM,
            [
                "vllm:num_requests_waiting_by_reason",
                "vllm:request_success_total",
                "vllm:time_to_first_token_seconds",
                "vllm:inter_token_latency_seconds",
                "vllm:e2e_request_latency_seconds",
                "vllm:engine_sleep_state",
                "vllm:request_prompt_tokens",
                "vllm:iteration_tokens_total",
            ],
        ),
        ("sglang", GOLDEN_SGLANG, ["sglang:max_total_num_tokens", "sglang:page_size", "sglang:context_len"]),
    ],
)
async def test_idle_metrics_are_byte_identical_to_the_golden(
    personality: str, golden: Path, families: list[str]
) -> None:
    """Idle engine, same model name, context length and KV size as the capture: the same bytes."""
    flags = ["--personality", personality, "--kv-cache-tokens", "18208552"]
    client = await _client(*flags, "--engine-version", CAPTURED[personality])
    try:
        text = await (await client.get("/metrics")).text()
    finally:
        await client.close()
    gold = golden_body(golden / "metrics_0_idle.txt")
    for family in families:
        ours = _family_block(text, family)
        assert ours, family
        assert ours == _family_block(gold, family), family
    # families appear only where the real engine has them when idle (SGLang: no series before requests)
    assert set(headers_and_families(text)) <= set(headers_and_families(gold))
