"""Outcomes and lateness figures that must not mislead (issue 11 items 4 and 6), on both HTTP clients:
refused connections are `connect_error`, loadgen's own cancellations are not failures, and a
fixed-concurrency run's wait for a slot is slot wait, not the client's lateness."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from loadgen.config import HTTP_CLIENTS, RunConfig
from loadgen.records import RequestRecord
from loadgen.run.runner import run_benchmark
from loadgen.transport.aiohttp_client import finalize, request_headers, send_request
from loadgen.transport.rawhttp import RawClient
from tests.loadgen_servers import FakeEngine, free_port, loopback_config, serve

pytestmark = pytest.mark.timeout(90)
both_clients = pytest.mark.parametrize("http_client", HTTP_CLIENTS)


def _record() -> RequestRecord:
    return RequestRecord(0, "r-000000", False, 0, 16, 8)


async def _send_refused(http_client: str, base_url: str) -> RequestRecord:
    body = b'{"prompt": [1, 2], "max_tokens": 2, "stream": true}'
    if http_client == "raw":
        client = RawClient(base_url, None, limit=1, timeout_s=5.0)
        try:
            return finalize(await client.send(_record(), "/v1/completions", body))
        finally:
            client.close()
    async with aiohttp.ClientSession() as session:
        headers = request_headers(None, "r-000000")
        return finalize(await send_request(session, f"{base_url}/v1/completions", body, headers, _record()))


@both_clients
async def test_item4_connection_refused_is_connect_error(http_client: str) -> None:
    record = await _send_refused(http_client, f"http://127.0.0.1:{free_port()}")
    assert record.outcome == "connect_error", record.error
    assert record.error  # says what failed (refused), one line
    assert "\n" not in record.error


@both_clients
async def test_item4_a_broken_open_connection_is_still_disconnect(tmp_path: Path, http_client: str) -> None:
    engine = FakeEngine(ttft_s=0.002, itl_s=0.001, plan=["disconnect"])
    async with serve(engine.app()) as url:
        result = await run_benchmark(_config(url, tmp_path, http_client, num_prompts=3), progress=False)
    by = result.summary["requests"]["by_outcome"]
    assert (by["disconnect"], by["connect_error"]) == (3, 0)


def _config(base_url: str, tmp_path: Path, http_client: str, **kw: Any) -> RunConfig:
    return loopback_config(base_url, tmp_path, **{"http_client": http_client, "max_error_rate": 1.0, **kw})


@both_clients
async def test_item4_requests_loadgen_cancels_are_not_failures(tmp_path: Path, http_client: str) -> None:
    # errors come back at once, ok streams take ~0.5 s: the error budget stops the run while ok
    # streams are in flight, and loadgen cancels them
    engine = FakeEngine(ttft_s=0.25, itl_s=0.04, plan=["http_error", "http_error", "ok"])
    async with serve(engine.app()) as url:
        config = _config(url, tmp_path, http_client, num_prompts=300, max_concurrency=12, max_error_rate=0.3)
        result = await run_benchmark(config, progress=False)
    assert "exceeded --max-error-rate" in (result.summary["partial_reason"] or "")
    req, by = result.summary["requests"], result.summary["requests"]["by_outcome"]
    assert by["cancelled"] > 0
    assert req["cancelled"] == by["cancelled"]
    assert req["failed"] == by["http_error"]  # cancelled are not failures
    # error rate = failed / (ok + failed), the rate the stop reason is about
    assert result.summary["error_rate"] == pytest.approx(req["failed"] / (req["ok"] + req["failed"]))
    assert req["measured"] == req["ok"] + req["failed"] + req["cancelled"]  # nothing lost


@both_clients
async def test_item6_fixed_concurrency_waits_for_slots_not_late(tmp_path: Path, http_client: str) -> None:
    """`--rate inf --max-concurrency 4` against the slow (real-time) simulated engine."""
    config = RunConfig(
        target="sim",
        rate=float("inf"),
        max_concurrency=4,
        num_prompts=24,
        input_len="fixed:32",
        output_len="fixed:24",
        sim_args=("--time-scale", "1"),
        metrics_port=0,
        linger_s=0,
        results_dir=str(tmp_path),
        http_client=http_client,
    )
    result = await run_benchmark(config, progress=False)
    s = result.summary
    assert s["requests"]["ok"] == 24
    e2e_p50 = s["e2e_s"]["p50"]
    # 20 of 24 requests wait for a slot, the last ones about (24 / 4 - 1) request durations
    assert s["slot_wait_s"]["p99"] > 3 * e2e_p50
    assert s["schedule_lag_s"]["p99"] < 0.05  # under LoadgenBehindSchedule's threshold
    assert s["schedule_lag_s"]["p99"] < s["slot_wait_s"]["p99"] / 10
    lines = [json.loads(x) for x in (result.result_dir / "requests.jsonl").read_text().splitlines()]
    for line in lines:  # sent - scheduled = slot wait + lateness, per request
        total = line["sent_s"] - line["scheduled_s"]
        assert total == pytest.approx(line["slot_wait_s"] + line["schedule_lag_s"], abs=1e-6)
        assert line["due_s"] == pytest.approx(line["scheduled_s"] + line["slot_wait_s"], abs=1e-6)
    assert sum(1 for line in lines if line["slot_wait_s"] > 0) == 20  # the first 4 go at once
