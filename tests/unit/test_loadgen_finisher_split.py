"""The finisher parses a long finished stream, yields to the event loop, then encodes its line (reads
that came in meanwhile are stamped in between); a short one is done in one step. It waits a moment
for a batch of finished requests to gather and parses them together (FINISH_GATHER, issue #23)."""

from __future__ import annotations

import asyncio

import pytest

from loadgen.config import RunConfig
from loadgen.records import RequestRecord
from loadgen.run import measure
from loadgen.run.measure import FINISH_GATHER, SPLIT_READS, Run

TOKEN = b'data: {"choices":[{"index":0,"text":"x"}]}\n\n'


class _Journal:
    def __init__(self, events: list[str]) -> None:
        self.events = events

    def add(self, record: RequestRecord, start_ns: int) -> None:
        self.events.append(f"encoded {record.index}")


def _record(index: int, tokens: int) -> RequestRecord:
    """A finished stream of `tokens` token reads and a [DONE] read."""
    record = RequestRecord(index, f"r{index}", False, 0, 32, tokens)
    record.raw = [(i, TOKEN) for i in range(tokens)] + [(tokens, b"data: [DONE]\n\n")]
    return record


def _run(events: list[str]) -> Run:
    run = Run(RunConfig(base_url="http://127.0.0.1:1", model="m", metrics_port=0), "run-1", progress=False)
    run.journal = _Journal(events)  # type: ignore[assignment]
    return run


async def _order(tokens: int) -> tuple[list[str], RequestRecord]:
    events: list[str] = []
    run = _run(events)
    record = _record(0, tokens)
    run.on_done(record)
    finisher = asyncio.create_task(run.finisher())
    asyncio.get_running_loop().call_soon(events.append, "loop turn")
    await asyncio.wait_for(run.finished_queue.join(), 10)
    finisher.cancel()
    assert run.backlog.requests == 0
    return events, record


@pytest.fixture
def no_gather(monkeypatch: pytest.MonkeyPatch) -> None:
    """The split's tests parse as soon as a request is queued (no batch gathers)."""
    monkeypatch.setattr(measure, "FINISH_GATHER", 1)


@pytest.mark.asyncio
@pytest.mark.usefixtures("no_gather")
async def test_a_long_stream_is_encoded_after_a_turn_of_the_loop() -> None:
    events, record = await _order(SPLIT_READS - 1)  # SPLIT_READS reads with the [DONE]
    assert events == ["loop turn", "encoded 0"]
    assert record.outcome == "ok"
    assert len(record.token_ns) == SPLIT_READS - 1


@pytest.mark.asyncio
@pytest.mark.usefixtures("no_gather")
async def test_a_short_stream_is_parsed_and_encoded_in_one_step() -> None:
    events, record = await _order(SPLIT_READS - 2)
    assert events == ["encoded 0", "loop turn"]
    assert record.outcome == "ok"


@pytest.mark.asyncio
async def test_the_finisher_lets_a_batch_gather_before_it_parses() -> None:
    events: list[str] = []
    run = _run(events)
    run.on_done(_record(0, 4))

    def arrive() -> None:  # three more end while the finisher waits
        for index in (1, 2, 3):
            run.on_done(_record(index, 4))
        events.append("arrived")

    finisher = asyncio.create_task(run.finisher())
    asyncio.get_running_loop().call_soon(arrive)
    await asyncio.wait_for(run.finished_queue.join(), 10)
    finisher.cancel()
    assert events == ["arrived", "encoded 0", "encoded 1", "encoded 2", "encoded 3"]
    assert run.backlog.requests == 0


@pytest.mark.asyncio
async def test_the_finisher_does_not_wait_when_a_batch_is_already_there() -> None:
    events: list[str] = []
    run = _run(events)
    for index in range(FINISH_GATHER):
        run.on_done(_record(index, 4))
    finisher = asyncio.create_task(run.finisher())
    asyncio.get_running_loop().call_soon(events.append, "loop turn")
    await asyncio.wait_for(run.finished_queue.join(), 10)
    finisher.cancel()
    assert events[0] == "encoded 0"  # parsed at once, before the loop turned
    assert sorted(events) == sorted(["loop turn", *(f"encoded {i}" for i in range(FINISH_GATHER))])
