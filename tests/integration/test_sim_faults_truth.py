"""Fault injection (errors, stalls, disconnects, corrupt chunks) and ground-truth accuracy."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import aiohttp
import pytest
from aiohttp.test_utils import TestClient, TestServer

from simengine.app import build_app
from simengine.config import parse_args
from simengine.faults import FaultInjector

STREAM = {"prompt": "fault test", "max_tokens": 10, "ignore_eos": True, "stream": True}


async def _client(*flags: str) -> TestClient:  # type: ignore[type-arg]
    client = TestClient(
        TestServer(build_app(parse_args(["--time-scale", "20", *flags])), host="127.0.0.1", port=0)
    )
    await client.start_server()
    return client


def test_fault_draws_are_seeded_and_off_by_default() -> None:
    assert not FaultInjector(1).draw(10).any_stream_fault
    a = [FaultInjector(7, disconnect_rate=0.5).draw(10) for _ in range(1)]
    b = [FaultInjector(7, disconnect_rate=0.5).draw(10) for _ in range(1)]
    assert a == b
    inj = FaultInjector(7, disconnect_rate=0.5)
    hits = sum(inj.draw(10).disconnect_at == 5 for _ in range(400))
    assert 150 < hits < 250  # about half, always at the middle token


async def test_error_rate_one_gives_500_with_openai_error_json() -> None:
    client = await _client("--fault-error-rate", "1")
    try:
        resp = await client.post("/v1/completions", json=STREAM)
        assert resp.status == 500
        body = await resp.json()
        assert body["error"]["code"] == 500
        assert "fault" in body["error"]["message"]
    finally:
        await client.close()


async def _read_all(resp: aiohttp.ClientResponse, into: list[bytes]) -> None:
    async for chunk in resp.content.iter_any():
        into.append(chunk)


async def test_disconnect_drops_the_connection_mid_stream_and_the_engine_carries_on() -> None:
    client = await _client("--fault-disconnect-rate", "1")
    try:
        resp = await client.post("/v1/completions", json=STREAM)
        got: list[bytes] = []
        with pytest.raises(aiohttp.ClientPayloadError):
            await _read_all(resp, got)
        assert (
            b"".join(got).count(b'"text"') == 5
        )  # half of the 10 tokens arrived, then the connection went away
        text = await (await client.get("/metrics")).text()
        assert 'finished_reason="abort",model_name="sim-llama-8b"} 1.0' in text
        stats = await (await client.get("/sim/stats")).json()
        assert stats["running"] == 0
        assert stats["in_flight"] == 0
    finally:
        await client.close()


async def test_malformed_rate_one_corrupts_one_chunk() -> None:
    client = await _client("--fault-malformed-rate", "1")
    try:
        resp = await client.post("/v1/completions", json=STREAM)
        events = [line[6:] for line in (await resp.text()).split("\n") if line.startswith("data: ")]
        bad = []
        for e in events[:-1]:
            try:
                json.loads(e)
            except ValueError:
                bad.append(e)
        assert len(bad) == 1
        assert events[-1] == "[DONE]"
    finally:
        await client.close()


async def test_stall_pauses_the_stream_mid_way() -> None:
    client = await _client("--fault-stall-ms", "300", "--time-scale", "1")
    try:
        resp = await client.post("/v1/completions", json=STREAM)
        arrivals: list[float] = []
        async for _chunk in resp.content.iter_any():
            arrivals.append(time.perf_counter())
        gaps = [b - a for a, b in zip(arrivals, arrivals[1:], strict=False)]
        assert sum(g >= 0.28 for g in gaps) == 1  # exactly one pause of ~300 ms
        assert arrivals[-1] - arrivals[0] < 1.0
    finally:
        await client.close()


async def test_ground_truth_matches_what_the_client_saw(tmp_path: Path) -> None:
    truth = tmp_path / "gt.jsonl"
    client = await _client("--ground-truth", str(truth), "--ground-truth-tokens", "--time-scale", "4")
    try:
        sent = time.perf_counter_ns()
        resp = await client.post("/v1/completions", json=STREAM, headers={"X-Request-Id": "req-42"})
        reads: list[int] = []
        async for chunk in resp.content.iter_any():
            if b'"text"' in chunk:
                reads.extend([time.perf_counter_ns()] * chunk.count(b'"text"'))
        await asyncio.sleep(0.05)
    finally:
        await client.close()
    rows = [json.loads(line) for line in truth.read_text().splitlines()]
    assert len(rows) == 1
    gt = rows[0]
    assert gt["x_request_id"] == "req-42"
    assert gt["tokens_sent"] == 10
    assert gt["outcome"] == "ok"
    assert sent <= gt["arrival_ns"] <= gt["first_token_ns"] <= gt["last_token_ns"]
    assert len(gt["token_send_ns"]) == 10
    # each token is read by the client after the server wrote it, and soon after (same host, loopback)
    for server_ns, client_ns in zip(gt["token_send_ns"], reads, strict=True):
        assert 0 <= client_ns - server_ns < 200_000_000
    assert (
        abs(
            gt["last_token_wall_ns"]
            - gt["first_token_wall_ns"]
            - (gt["last_token_ns"] - gt["first_token_ns"])
        )
        < 5_000_000
    )


async def test_client_going_away_frees_its_slot_and_counts_as_abort() -> None:
    client = await _client("--time-scale", "1")
    try:
        resp = await client.post("/v1/completions", json=dict(STREAM, max_tokens=2000))
        await resp.content.readany()  # first token(s) arrived
        resp.close()  # the client hangs up mid-stream
        stats: dict[str, int] = {}
        for _ in range(200):  # bounded: the engine notices at its next write
            stats = await (await client.get("/sim/stats")).json()
            if stats["in_flight"] == 0:
                break
            await asyncio.sleep(0.01)
        assert stats["in_flight"] == 0
        assert stats["running"] == 0
        assert stats["generation_tokens"] < 2000
        text = await (await client.get("/metrics")).text()
        assert 'finished_reason="abort",model_name="sim-llama-8b"} 1.0' in text
    finally:
        await client.close()
