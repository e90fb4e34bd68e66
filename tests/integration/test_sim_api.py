"""The OpenAI API of the simulated engine against the real vLLM 0.26.0 / SGLang 0.5.14 captures.

A real aiohttp server on 127.0.0.1 port 0 per test; chunk shapes (key order and value types) must equal
the golden captures' chunk for chunk; values (ids, text) naturally differ.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from simengine.app import build_app
from simengine.config import parse_args
from tests.conftest import GOLDEN_SGLANG, GOLDEN_VLLM

GOLDEN = {"vllm": GOLDEN_VLLM, "sglang": GOLDEN_SGLANG}
FAST = ["--time-scale", "20", "--served-model-name", "tiny-llama", "--max-model-len", "2048"]


def shape(obj: Any) -> Any:
    """Key order and value types, recursively (values themselves ignored)."""
    if isinstance(obj, dict):
        return [(k, shape(v)) for k, v in obj.items()]
    if isinstance(obj, list):
        return [shape(obj[0])] if obj else []
    if obj is None:
        return "null"
    return "number" if isinstance(obj, int | float) and not isinstance(obj, bool) else type(obj).__name__


def sse_events(raw: str) -> list[str]:
    return [line[len("data: ") :] for line in raw.split("\n") if line.startswith("data: ")]


def golden_body(path: Path) -> str:
    """Body of a golden capture (after the blank line that ends the headers)."""
    return path.read_text(encoding="utf-8").split("\n\n", 1)[1]


def golden_request(personality: str, name: str) -> dict[str, Any]:
    req = json.loads((GOLDEN[personality] / f"{name}.request.json").read_text())
    return {"path": req["path"], "body": req["body"]}


async def _client(*flags: str) -> TestClient:  # type: ignore[type-arg]
    client = TestClient(TestServer(build_app(parse_args([*FAST, *flags])), host="127.0.0.1", port=0))
    await client.start_server()
    return client


@pytest.fixture(params=["vllm", "sglang"])
async def personality_client(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    client = await _client("--personality", request.param)
    yield request.param, client
    await client.close()


@pytest.mark.parametrize(
    "name", ["sse_completions", "sse_chat", "sse_completions_continuous_usage", "sse_completions_ignore_eos"]
)
async def test_sse_chunks_have_the_golden_shapes(personality_client: Any, name: str) -> None:
    personality, client = personality_client
    req = golden_request(personality, name)
    body = dict(req["body"], ignore_eos=True)
    resp = await client.post(req["path"], json=body)
    assert resp.status == 200
    assert resp.headers["Content-Type"] == "text/event-stream; charset=utf-8"
    ours = sse_events(await resp.text())
    gold = sse_events(golden_body(GOLDEN[personality] / f"{name}.txt"))
    assert ours[-1] == gold[-1] == "[DONE]"
    assert len(ours) == len(gold) or personality == "sglang"  # SGLang's chat merged one token in its capture
    ours_j = [json.loads(e) for e in ours[:-1]]
    gold_j = [json.loads(e) for e in gold[:-1]]
    for idx in (0, 1, -2, -1):  # first, second, last token-bearing, usage
        assert shape(ours_j[idx]) == shape(gold_j[idx]), f"chunk {idx} of {name}"
    usage = ours_j[-1]["usage"]
    assert usage["completion_tokens"] == body["max_tokens"]
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


async def test_sse_without_include_usage_ends_with_done_and_no_usage(personality_client: Any) -> None:
    _, client = personality_client
    resp = await client.post(
        "/v1/completions", json={"prompt": "hi", "max_tokens": 4, "stream": True, "ignore_eos": True}
    )
    events = sse_events(await resp.text())
    assert events[-1] == "[DONE]"
    assert len(events) == 5
    assert all(json.loads(e)["choices"] for e in events[:-1])


@pytest.mark.parametrize("name", ["json_completion", "json_chat"])
async def test_non_streaming_bodies_have_the_golden_shapes(personality_client: Any, name: str) -> None:
    personality, client = personality_client
    req = golden_request(personality, name)
    resp = await client.post(req["path"], json=dict(req["body"], ignore_eos=True))
    assert resp.status == 200
    ours = await resp.json()
    gold = json.loads(golden_body(GOLDEN[personality] / f"{name}.txt"))
    assert shape(ours) == shape(gold)
    assert ours["usage"]["completion_tokens"] == req["body"]["max_tokens"]


async def test_prompt_forms_and_token_counts(personality_client: Any) -> None:
    _, client = personality_client
    for prompt, expect_prompt_tokens, choices in (
        ([5, 6, 7, 8], 4, 1),
        ("one two", None, 1),
        (["a b", "c d e"], None, 2),
        ([[1, 2], [3, 4, 5]], 5, 2),
    ):
        resp = await client.post(
            "/v1/completions", json={"prompt": prompt, "max_tokens": 3, "ignore_eos": True}
        )
        assert resp.status == 200, await resp.text()
        body = await resp.json()
        assert sorted(c["index"] for c in body["choices"]) == list(range(choices))
        assert body["usage"]["completion_tokens"] == 3 * choices
        if expect_prompt_tokens is not None:
            assert body["usage"]["prompt_tokens"] == expect_prompt_tokens


async def test_max_completion_tokens_and_min_tokens(personality_client: Any) -> None:
    _, client = personality_client
    resp = await client.post(
        "/v1/chat/completions",
        json={"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": 7, "ignore_eos": True},
    )
    assert (await resp.json())["usage"]["completion_tokens"] == 7
    for seed in range(5):  # without ignore_eos the length is drawn, but never below min_tokens
        resp = await client.post(
            "/v1/completions", json={"prompt": "x", "max_tokens": 50, "min_tokens": 40, "seed": seed}
        )
        n = (await resp.json())["usage"]["completion_tokens"]
        assert 40 <= n <= 50


async def test_output_lengths_without_ignore_eos_are_seeded_and_capped() -> None:
    client = await _client("--eos-mean-tokens", "20")
    try:
        lengths = []
        for seed in (1, 2, 3, 1):
            resp = await client.post("/v1/completions", json={"prompt": "x", "max_tokens": 64, "seed": seed})
            body = await resp.json()
            lengths.append(body["usage"]["completion_tokens"])
            assert body["choices"][0]["finish_reason"] in ("stop", "length")
        assert lengths[0] == lengths[3]
        assert all(1 <= n <= 64 for n in lengths)
    finally:
        await client.close()


async def test_vllm_errors_match_the_golden_bodies() -> None:
    client = await _client("--personality", "vllm")
    try:
        req = golden_request("vllm", "json_error_too_long")
        resp = await client.post(
            req["path"], json={"model": "tiny-llama", "prompt": list(range(2, 2035)), "max_tokens": 16}
        )
        assert resp.status == 400
        gold = json.loads(golden_body(GOLDEN_VLLM / "json_error_too_long.txt"))
        ours = await resp.json()
        assert shape(ours) == shape(gold)
        assert ours["error"]["message"] == gold["error"]["message"]  # same numbers -> same text
        req = golden_request("vllm", "json_error_bad_model")
        resp = await client.post(req["path"], json=req["body"])
        assert resp.status == 404
        assert await resp.json() == json.loads(golden_body(GOLDEN_VLLM / "json_error_bad_model.txt"))
    finally:
        await client.close()


async def test_sglang_errors_match_the_golden_bodies() -> None:
    client = await _client("--personality", "sglang")
    try:
        resp = await client.post("/v1/completions", json={"prompt": list(range(2, 4654)), "max_tokens": 16})
        assert resp.status == 400
        assert await resp.json() == json.loads(golden_body(GOLDEN_SGLANG / "json_error_too_long.txt"))
        req = golden_request("sglang", "json_error_bad_model")  # SGLang serves any model name (200)
        resp = await client.post(req["path"], json=dict(req["body"], ignore_eos=True))
        assert resp.status == 200
        assert (await resp.json())["model"] == "no-such-model"  # and echoes it, as the capture shows
    finally:
        await client.close()


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"prompt": "x", "n": 2}, "n"),
        ({"prompt": []}, "prompt"),
        ({"prompt": 5}, "prompt"),
        ({"prompt": "x", "max_tokens": 0}, "max_tokens"),
        ({"prompt": "x", "max_tokens": 3, "min_tokens": 5}, "min_tokens"),
    ],
)
async def test_bad_requests_are_400_with_openai_error_json(
    personality_client: Any, body: dict[str, Any], param: str | None
) -> None:
    personality, client = personality_client
    resp = await client.post("/v1/completions", json=body)
    assert resp.status == 400
    err = await resp.json()
    err = err["error"] if personality == "vllm" else err
    assert err["code"] == 400
    assert err["type"] == "BadRequestError"
    assert err["message"]
    if param:
        assert err["param"] == param


async def test_invalid_json_is_400(personality_client: Any) -> None:
    _, client = personality_client
    resp = await client.post(
        "/v1/completions", data=b"{not json", headers={"Content-Type": "application/json"}
    )
    assert resp.status == 400


async def test_api_key_is_enforced_when_set() -> None:
    client = await _client("--api-key", "sk-test", "sk-other", "--dev-mode")
    try:
        body = {"prompt": "x", "max_tokens": 1}
        assert (await client.post("/v1/completions", json=body)).status == 401
        for key in ("sk-test", "sk-other"):  # vLLM accepts any one of its keys
            ok = await client.post("/v1/completions", json=body, headers={"Authorization": f"Bearer {key}"})
            assert ok.status == 200
        wrong = await client.post("/v1/completions", json=body, headers={"Authorization": "Bearer sk-tes"})
        assert wrong.status == 401
        resp = await client.get("/server_info")
        assert resp.status == 200
        info = await resp.json()
        assert info["server_args"]["api_key"] == "<redacted>"
        assert "sk-test" not in json.dumps(info)
        assert "sk-other" not in json.dumps(info)
    finally:
        await client.close()


SECRET_FLAGS = [  # unknown flags in every form a launch line gives them, each with a distinct secret
    "--hf-token=hf_planted_1",
    "--hf-token-2",
    "hf_planted_2",
    "--ssl-keyfile-password",
    "pw_planted_3",
    "--db-passwd=pw_planted_4",
    "--auth-header",
    "Bearer planted_5",
    "--api-key",
    "sk-planted-6",
]


@pytest.mark.parametrize(("personality", "path"), [("vllm", "/server_info"), ("sglang", "/get_server_info")])
async def test_server_info_redacts_secrets_in_unknown_flags(personality: str, path: str) -> None:
    client = await _client("--personality", personality, "--dev-mode", "--enforce-eager", *SECRET_FLAGS)
    try:
        resp = await client.get(path)
        assert resp.status == 200
        text = await resp.text()
        assert "planted" not in text
        unrecognized = json.loads(text)["unrecognized_args"]
        assert unrecognized["hf-token"] == unrecognized["db-passwd"] == "<redacted>"
        assert unrecognized["ssl-keyfile-password"] == unrecognized["auth-header"] == "<redacted>"
        assert unrecognized["enforce-eager"] is True  # what is not secret stays readable
    finally:
        await client.close()


async def test_several_prompts_stream_as_several_choices_with_one_usage(personality_client: Any) -> None:
    _, client = personality_client
    resp = await client.post(
        "/v1/completions",
        json={
            "prompt": ["a b", "c d e"],
            "max_tokens": 3,
            "ignore_eos": True,
            "stream": True,
            "stream_options": {"include_usage": True},
        },
    )
    events = [json.loads(e) for e in sse_events(await resp.text())[:-1]]
    token_events = [e for e in events if e["choices"]]
    assert sorted(e["choices"][0]["index"] for e in token_events) == [0, 0, 0, 1, 1, 1]
    assert events[-1]["usage"]["completion_tokens"] == 6
    assert sum(1 for e in events if not e["choices"]) == 1


async def test_sim_stats_reports_step_timing(personality_client: Any) -> None:
    _, client = personality_client
    await client.post("/v1/completions", json={"prompt": "x", "max_tokens": 5, "ignore_eos": True})
    stats = await (await client.get("/sim/stats")).json()
    assert stats["steps"] >= 5
    assert stats["generation_tokens"] == 5
    assert stats["step_lateness_ms"]["p50"] >= 0.0
    assert (await client.post("/sim/stats/reset")).status == 204
    assert (await (await client.get("/sim/stats")).json())["steps"] == 0
