"""nvml/lanes.py: per-GPU threads, deadlines, no queue behind a hung call; manifest vs a failing collector."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

import pytest
from prometheus_client.core import Metric

from exporter.collectors.host import HostCollector
from exporter.manifest import ManifestBuilder
from exporter.nvml.lanes import CallTimeout, Lanes


def test_call_answers_within_the_deadline_and_raises_the_calls_own_error() -> None:
    lanes = Lanes()
    assert lanes.call(0, "read", lambda: 42, 1.0) == 42
    with pytest.raises(ZeroDivisionError):
        lanes.call(0, "read", lambda: 1 / 0, 1.0)


def test_a_hung_call_times_out_and_new_calls_join_it_instead_of_queueing() -> None:
    lanes = Lanes()
    release = threading.Event()
    runs: list[int] = []

    def hung() -> int:
        runs.append(1)
        release.wait(5)
        return 7

    with pytest.raises(CallTimeout, match=r"NVML read on 1: no answer within 0.05 s"):
        lanes.call(1, "read", hung, 0.05)
    started = time.perf_counter()
    with pytest.raises(CallTimeout):
        lanes.call(1, "read", hung, 5.0)  # joins the pending job: no second run queued behind it
    assert time.perf_counter() - started < 1.0  # ...and, already waited out once, is not waited again
    assert lanes.call(2, "read", lambda: 3, 1.0) == 3  # another GPU's lane is free
    assert runs == [1]
    release.set()
    time.sleep(0.1)  # the hung call returns; the next call is a fresh job, answered at once
    assert lanes.call(1, "read", hung, 1.0) == 7
    assert runs == [1, 1]
    lanes.close()


def test_gather_waits_once_for_a_late_lane_then_not_again() -> None:
    lanes = Lanes()
    release = threading.Event()
    calls = {0: lambda: "fast", 1: lambda: release.wait(5)}
    started = time.perf_counter()
    jobs = lanes.gather("scrape", calls, 0.2)
    first = time.perf_counter() - started
    assert jobs[0].done.is_set()
    assert jobs[0].value == "fast"
    assert not jobs[1].done.is_set()
    assert first >= 0.18  # waited for lane 1 up to the deadline
    started = time.perf_counter()
    again = lanes.gather("scrape", calls, 0.2)
    assert time.perf_counter() - started < 0.1  # lane 1 still pending: not waited for again
    assert again[1] is jobs[1]
    release.set()
    jobs[1].done.wait(1)
    # lane 1 answered, but later than the deadline: its next job is not waited for either
    late = lanes.gather("scrape", calls, 0.2)
    assert late[1] is not jobs[1]
    lanes.close()


class BrokenFacts:
    """A collector whose facts() raises."""

    name = "broken"

    def scrape(self) -> tuple[list[Metric], bool]:
        return [], True

    def facts(self, known: Mapping[str, Any]) -> dict[str, Any]:
        raise OSError("disk gone")


def test_a_collector_whose_facts_fail_leaves_the_rest_of_the_manifest() -> None:
    host = {"hostname": "h"}
    manifest = ManifestBuilder([BrokenFacts(), HostCollector(lambda: host)]).build()
    assert manifest["host"] == host
    assert {
        "id": "collector_facts_failed",
        "severity": "warning",
        "message": "broken: disk gone",
    } in manifest["checks"]
