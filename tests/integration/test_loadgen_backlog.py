"""The finisher's backlog stays bounded under saturation, and a saturated client says so."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from loadgen.config import RunConfig
from loadgen.records import RequestRecord
from loadgen.run import measure
from loadgen.run.backlog import Bound, held_bytes
from loadgen.run.measure import Run
from loadgen.run.progress import summary_table
from loadgen.run.runner import run_benchmark
from tests.conftest import GOLDEN_SSE_STREAMS
from tests.loadgen_servers import FakeEngine, golden_body, loopback_config, serve

pytestmark = pytest.mark.asyncio

FINISHED_AT_ONCE = 200  # requests finishing in one pass of the event loop (a saturated client)


def _config(base_url: str, tmp_path: Path, **kw: Any) -> RunConfig:
    return loopback_config(base_url, tmp_path, **{"output_len": "fixed:32", "max_error_rate": 1.0, **kw})


def _golden_record(index: int, path: Path) -> RequestRecord:
    """A finished request holding a real engine's stream as its raw reads, one event per read."""
    body, _ = golden_body(path)
    events = [e + b"\n\n" for e in body.split(b"\n\n") if e.strip()]
    record = RequestRecord(index, f"r-{index:06d}", False, 0, 16, len(events))
    record.sent_ns = 1_000
    record.raw = [(2_000 + i, event) for i, event in enumerate(events)]
    return record


async def test_the_finisher_never_lets_the_loop_run_with_the_backlog_over_its_bound(tmp_path, capsys):
    bound = Bound(requests=16, bytes=10**12)
    run = Run(_config("http://127.0.0.1:1", tmp_path), "t", progress=False)
    run.backlog.bound = bound
    path = GOLDEN_SSE_STREAMS[0]
    for index in range(FINISHED_AT_ONCE):
        run.on_done(_golden_record(index, path))
    assert run.backlog.requests == FINISHED_AT_ONCE
    assert run.backlog.bytes == FINISHED_AT_ONCE * held_bytes(_golden_record(0, path).raw)
    seen: list[int] = []  # the backlog each time another task (reads, sends) got the loop

    async def other_work() -> None:
        while run.backlog.requests:
            seen.append(run.backlog.requests)
            await asyncio.sleep(0)

    finisher = asyncio.create_task(run.finisher())
    await asyncio.sleep(0)  # the finisher takes the loop first, as when requests finish together
    await asyncio.wait_for(other_work(), timeout=30)
    await run.finished_queue.join()
    finisher.cancel()
    assert seen, "the loop ran other work while the backlog drained"
    assert max(seen) <= bound.requests
    assert run.finished == FINISHED_AT_ONCE  # every request parsed and accounted
    report = run.backlog.report()
    assert report["saturated"] is True
    assert report["peak_backlog_requests"] == FINISHED_AT_ONCE
    assert report["saturated_s"] > 0
    assert "client is saturated" in capsys.readouterr().err


async def test_a_client_under_its_bound_is_not_saturated(tmp_path):
    engine = FakeEngine(ttft_s=0.002, itl_s=0.001)
    async with serve(engine.app()) as url:
        result = await run_benchmark(_config(url, tmp_path, num_prompts=8, max_concurrency=1), progress=False)
    sat = result.summary["client_saturated"]
    assert sat["saturated"] is False
    assert sat["saturated_s"] == 0
    assert sat["peak_backlog_requests"] <= 1
    assert "CLIENT SATURATED" not in summary_table(result.summary)


async def test_a_saturated_run_reports_client_saturated(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(measure, "BACKLOG_BOUND", Bound(requests=1, bytes=10**12))
    monkeypatch.setattr(measure, "FINISH_SLICE_NS", 0)  # check the bound after every parse
    engine = FakeEngine(ttft_s=0.002, itl_s=0.001)  # every stream on the same clock: they end together
    async with serve(engine.app()) as url:
        config = _config(url, tmp_path, num_prompts=128, max_concurrency=64)
        result = await run_benchmark(config, progress=False)
    sat = result.summary["client_saturated"]
    assert sat["saturated"] is True
    assert sat["peak_backlog_requests"] > sat["bound_requests"] == 1
    assert sat["peak_backlog_mb"] > 0
    stored = json.loads((result.result_dir / "summary.json").read_text())
    assert stored["client_saturated"] == sat
    assert result.summary["requests"]["ok"] == 128
    assert "client is saturated" in capsys.readouterr().err
    assert "CLIENT SATURATED" in summary_table(result.summary)
