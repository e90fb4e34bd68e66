"""The simulated engine's prefix cache seen from outside: equal token blocks give the cached tokens the
workload implies (loadgen.prefix_cache), reported per request in `usage.prompt_tokens_details` the way
each engine reports it, and the engine's own counters agree with the per-request sum; hits cut TTFT;
`/tokenize` and `/detokenize` answer like vLLM's."""

from __future__ import annotations

import json
import time
from typing import Any

from aiohttp.test_utils import TestClient, TestServer

from infergauge import engines
from loadgen.prefix_cache import implied_cached_tokens
from loadgen.targets.cache_counters import parse_counters
from loadgen.transport.sse import parse_stream
from simengine.app import build_app
from simengine.config import parse_args

FAST = ["--time-scale", "20", "--max-model-len", "2048", "--block-size", "16"]


def _block(first: int) -> list[int]:
    return list(range(first, first + 16))


A, B, C, D, X = (_block(100 + 16 * i) for i in range(5))
PROMPTS = [
    A + B + C + [7] * 5,  # cold: nothing cached
    A + B + C + [8] * 5,  # A, B, C seen: 48
    A + B + D + [9] * 3,  # A, B seen; D not: 32
    A + B + C,  # 48 tokens, all seen, but the last block holds the last token: (48 - 1) // 16 = 2 blocks
    X + A + B,  # A and B again, but after another first block: a new chain, 0
    A + B + C + [7] * 5,  # the first prompt again: its 3 full blocks, 48
]
IMPLIED = [0, 48, 32, 32, 0, 48]


async def _client(*flags: str) -> TestClient:  # type: ignore[type-arg]
    client = TestClient(TestServer(build_app(parse_args([*FAST, *flags])), host="127.0.0.1", port=0))
    await client.start_server()
    return client


async def _usage(client: TestClient, prompt: list[int], stream: bool) -> dict[str, Any]:  # type: ignore[type-arg]
    """The usage object of one completion (streamed: the final usage chunk)."""
    body: dict[str, Any] = {"prompt": prompt, "max_tokens": 3, "ignore_eos": True, "stream": stream}
    if stream:
        body["stream_options"] = {"include_usage": True}
    resp = await client.post("/v1/completions", json=body)
    assert resp.status == 200
    raw = await resp.read()
    if not stream:
        usage: dict[str, Any] = json.loads(raw)["usage"]
        return usage
    events = [json.loads(e[6:]) for e in raw.decode().split("\n\n") if e.startswith("data: {")]
    last: dict[str, Any] = events[-1]["usage"]
    assert parse_stream([(0, raw)]).cached_tokens == (last.get("prompt_tokens_details") or {}).get(
        "cached_tokens"
    )  # loadgen's parser reads what the engine sent
    return last


async def _serve_all(client: TestClient) -> list[dict[str, Any]]:  # type: ignore[type-arg]
    """Each prompt in turn (one at a time, so every earlier prefill has finished), streamed and not."""
    return [await _usage(client, prompt, stream=i % 2 == 0) for i, prompt in enumerate(PROMPTS)]


def test_the_implied_figures_of_the_test_prompts() -> None:
    assert implied_cached_tokens(PROMPTS, 16) == IMPLIED


async def test_vllm_reports_the_implied_cached_tokens_and_its_counters_agree() -> None:
    client = await _client("--personality", "vllm", "--enable-prompt-tokens-details")
    try:
        usages = await _serve_all(client)
        metrics = await (await client.get("/metrics")).text()
    finally:
        await client.close()
    # vLLM with the flag: {"cached_tokens": N} on every response, 0 included
    assert [u["prompt_tokens_details"] for u in usages] == [{"cached_tokens": n} for n in IMPLIED]
    counters = parse_counters(engines.get("vllm"), metrics)  # vllm:prefix_cache_hits/queries_total
    assert counters is not None
    assert counters.hit_tokens == sum(IMPLIED) == 160
    assert counters.queried_tokens == sum(u["prompt_tokens"] for u in usages) == sum(map(len, PROMPTS))


async def test_sglang_reports_only_hits_and_its_counters_agree() -> None:
    client = await _client("--personality", "sglang", "--enable-cache-report")
    try:
        usages = await _serve_all(client)
        metrics = await (await client.get("/metrics")).text()
    finally:
        await client.close()
    # SGLang with --enable-cache-report: {"cached_tokens": N} only when N > 0, else null (or absent on
    # the streamed completion's usage, which SGLang dumps without None fields)
    details = [(u.get("prompt_tokens_details") or {}).get("cached_tokens") for u in usages]
    assert details == [n or None for n in IMPLIED]
    counters = parse_counters(engines.get("sglang"), metrics)  # sglang:cached_tokens / prompt_tokens
    assert counters is not None
    assert counters.hit_tokens == sum(IMPLIED)
    assert counters.queried_tokens == sum(map(len, PROMPTS))


async def test_without_the_flag_no_details_are_sent() -> None:
    client = await _client("--personality", "vllm")
    try:
        streamed = await _usage(client, PROMPTS[0], stream=True)
        plain = await _usage(client, PROMPTS[0], stream=False)
    finally:
        await client.close()
    assert "prompt_tokens_details" not in streamed  # vLLM's final usage chunk drops None fields
    assert plain["prompt_tokens_details"] is None


async def _ttft_s(client: TestClient, prompt: list[int]) -> float:  # type: ignore[type-arg]
    body = {"prompt": prompt, "max_tokens": 2, "ignore_eos": True, "stream": True}
    sent = time.perf_counter()
    resp = await client.post("/v1/completions", json=body)
    buf = b""
    while b'"choices":[{' not in buf:
        chunk = await resp.content.readany()
        assert chunk, "stream ended before its first token"
        buf += chunk
    first = time.perf_counter() - sent
    await resp.read()
    return first


async def test_cached_blocks_cut_the_time_to_first_token() -> None:
    # a 30B model at real speed: the 2,032 uncached prompt tokens of the cold request take hundreds of
    # ms of prefill; the warm one computes its last 15 tokens only (the rest is 127 cached blocks)
    flags = ["--personality", "vllm", "--time-scale", "1", "--model-params", "3e10"]
    client = await _client(*flags)
    prompt = list(range(1000, 3032))
    try:
        cold = await _ttft_s(client, prompt)
        warm = await _ttft_s(client, prompt)
    finally:
        await client.close()
    assert warm < cold / 4, (cold, warm)


async def test_tokenize_and_detokenize_like_vllm() -> None:
    client = await _client("--personality", "vllm")
    text = "The cache keeps blocks"
    try:
        tok = await (await client.post("/tokenize", json={"prompt": text, "return_token_strs": True})).json()
        no_bos = {"prompt": text, "add_special_tokens": False}
        bare = await (await client.post("/tokenize", json=no_bos)).json()
        chat = {"messages": [{"role": "user", "content": text}]}
        chat_tok = await (await client.post("/tokenize", json=chat)).json()
        served = await (await client.post("/v1/completions", json={"prompt": text, "max_tokens": 1})).json()
        served_chat = await (await client.post("/v1/chat/completions", json={**chat, "max_tokens": 1})).json()
        back = await (await client.post("/detokenize", json={"tokens": bare["tokens"]})).json()
        bad = await client.post("/detokenize", json={"tokens": "not ids"})
    finally:
        await client.close()
    assert list(tok) == ["count", "max_model_len", "tokens", "token_strs"]  # vLLM's TokenizeResponse
    assert tok["max_model_len"] == 2048
    assert tok["count"] == len(tok["tokens"]) == len(tok["token_strs"])
    assert tok["tokens"] == [1, *bare["tokens"]]  # add_special_tokens (default true): BOS first
    assert bare["token_strs"] is None
    # the same ids the engine computes (and caches) the request with
    assert tok["count"] == served["usage"]["prompt_tokens"]
    assert chat_tok["count"] == served_chat["usage"]["prompt_tokens"]
    assert back == {"prompt": text}
    assert bad.status == 400


def test_the_embedded_engine_reports_cached_tokens_unless_told_not_to() -> None:
    from simengine.embedded import EmbeddedEngine

    assert EmbeddedEngine().config.enable_prompt_tokens_details is True  # `loadgen --target sim`
    assert EmbeddedEngine(["--no-enable-prompt-tokens-details"]).config.enable_prompt_tokens_details is False
    assert parse_args([]).enable_prompt_tokens_details is False  # a standalone one, as the real engines


async def test_llamacpp_reports_cached_tokens_on_every_response_streamed_too() -> None:
    client = await _client("--personality", "llamacpp")
    try:
        usages = await _serve_all(client)
    finally:
        await client.close()
    assert [u["prompt_tokens_details"] for u in usages] == [{"cached_tokens": n} for n in IMPLIED]
