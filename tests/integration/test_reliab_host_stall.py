"""Issue 22 item 7 (host stall): a mid-run stall of loadgen's host (the process SIGSTOP'd for 1.5 s)
is told apart from a slow engine in the record: the requests in flight during it carry
`host_stall_s`, the summary's `host_stalls` counts it; a slow engine alone leaves both at zero. With
kernel receive stamps (the raw client on Linux) the requests' own times are the kernel's, so the
stall does not stretch them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from loadgen.records import RequestRecord
from loadgen.run.stalls import STALL_NS, Stalls
from tests.loadgen_servers import FakeEngine, ServerThread

pytestmark = pytest.mark.timeout(120)
MS = 1_000_000
STOP_S = 1.5


def _run(
    base_url: str, results: Path, stop_at_s: float | None
) -> tuple[dict[str, Any], list[dict[str, Any]], str]:
    cmd = [
        *(sys.executable, "-m", "loadgen.cli.main", "run", "--target", "openai", "--base-url", base_url),
        *("--num-prompts", "40", "--rate", "10", "--warmup", "0", "--output-len", "fixed:16"),
        *("--results-dir", str(results), "--metrics-port", "0", "--linger", "0", "--quiet", "--json"),
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if stop_at_s is not None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not list(results.glob("*/requests.jsonl")):
            time.sleep(0.05)  # sending: the first requests are journaled
        time.sleep(stop_at_s)
        os.kill(proc.pid, signal.SIGSTOP)
        time.sleep(STOP_S)
        os.kill(proc.pid, signal.SIGCONT)
    out, err = proc.communicate(timeout=90)
    assert proc.returncode == 0, err
    (run,) = [p for p in results.iterdir() if p.is_dir() and not p.name.startswith(".")]
    lines = [json.loads(x) for x in (run / "requests.jsonl").read_text().splitlines()]
    stamps = json.loads((run / "manifest.json").read_text())["client"]["arrival_stamps"]
    return json.loads(out), lines, stamps


def test_a_host_stall_is_told_apart_from_a_slow_engine(tmp_path: Path) -> None:
    engine = FakeEngine(ttft_s=0.3, itl_s=0.02)  # ~0.6 s a request: several in flight at 10 req/s
    with ServerThread(engine.app) as server:
        stalled, stalled_lines, stamps = _run(server.base_url, tmp_path / "stalled", stop_at_s=1.0)
        slow, slow_lines, _ = _run(server.base_url, tmp_path / "slow", stop_at_s=None)
    stalls = stalled["host_stalls"]
    assert stalls["count"] >= 1
    assert stalls["max_s"] >= STOP_S - 0.3  # the monitor's 0.25 s tick may start inside it
    hit = [x for x in stalled_lines if x["host_stall_s"] > 0]
    assert 1 <= len(hit) == stalls["requests_affected"] < len(stalled_lines)
    assert all(x["host_stall_s"] <= x["done_s"] - x["sent_s"] + 1e-6 for x in hit)
    if stamps == "read":  # a read is stamped when the stopped loop gets to it: after the stall
        assert max(x["host_stall_s"] for x in hit) >= STOP_S - 0.3
    else:  # kernel stamps: bytes that arrived while loadgen was stopped keep the kernel's time, so a
        # request in flight at the stall ends at its true end (~0.6 s a request), inside the stall
        assert stamps == "kernel"
        assert max(x["done_s"] - x["sent_s"] for x in hit) < STOP_S - 0.3
    # the slow engine alone: slow requests, no stall of that size (a busy test host may still add a
    # short one: it is a stall of loadgen's host, and reported as one)
    assert slow["host_stalls"]["max_s"] < 0.5
    assert all(x["host_stall_s"] < 0.5 for x in slow_lines)
    assert slow["e2e_s"]["p50"] >= 0.5


def test_stall_overlap_arithmetic() -> None:
    stalls = Stalls()
    stalls.woke(1_000 * MS, 1_010 * MS)  # 10 ms late: jitter, not a stall
    assert stalls.spans == []
    stalls.woke(2_000 * MS, 3_500 * MS)  # 1.5 s late
    stalls.overdue(0)  # nothing expected: nothing noted
    stalls.expected_ns = 2_000 * MS
    stalls.overdue(3_600 * MS)  # the finisher saw the same stall end later: one span, extended
    assert stalls.spans == [(2_000 * MS, 3_600 * MS)]
    record = RequestRecord(0, "r", False, 0, 1, 1)
    record.sent_ns, record.done_ns = 1_500 * MS, 2_500 * MS  # overlaps 2.0-2.5 s
    stalls.stamp(record)
    assert record.host_stall_ns == 500 * MS
    report = stalls.report([record])
    assert (report["count"], report["max_s"], report["requests_affected"]) == (1, 1.6, 1)
    assert report["threshold_s"] == STALL_NS / 1e9
