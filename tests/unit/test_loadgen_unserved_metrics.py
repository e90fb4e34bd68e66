"""Run.account feeds the live metrics only while they are served (--metrics-port 0: nobody can read
them, so a finished request costs no histogram updates)."""

from __future__ import annotations

from typing import Any

from loadgen.config import RunConfig
from loadgen.records import RequestRecord
from loadgen.run.measure import Run


class _Metrics:
    def __init__(self, address: tuple[str, int] | None) -> None:
        self.address, self.seen = address, 0

    def observe(self, record: RequestRecord, met: bool) -> None:
        self.seen += 1


def _record(i: int) -> RequestRecord:
    return RequestRecord(i, f"r{i}", False, 0, 32, 32, outcome="ok")


def _run(metrics: Any) -> Run:
    run = Run(RunConfig(base_url="http://127.0.0.1:1", model="m", metrics_port=0), "run-1", progress=False)
    run.metrics = metrics
    return run


def test_unserved_metrics_are_not_updated_but_the_run_still_counts() -> None:
    metrics = _Metrics(None)
    run = _run(metrics)
    for i in range(3):
        run.account(_record(i))
    assert metrics.seen == 0
    assert run.finished == 3


def test_served_metrics_see_every_finished_request() -> None:
    metrics = _Metrics(("127.0.0.1", 40123))  # any bound address: nothing listens in this test
    run = _run(metrics)
    for i in range(3):
        run.account(_record(i))
    assert metrics.seen == 3
