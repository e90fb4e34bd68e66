"""Issue 22 item 1: `kill -9` of one `--workers 2` worker mid-run. The requests it finished are on
disk (its journal); the merged record and the store row include them, the run is marked partial,
and the coordinator says which worker died and by which signal."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(180)
REQUESTS, RATE = 240, 20  # 12 s of sending: the kill comes well inside it


def spawned_workers(pid: int) -> list[int]:
    """The coordinator's worker processes (multiprocessing spawn children, not its resource tracker)."""
    try:
        kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        return [int(k) for k in kids if b"spawn_main" in Path(f"/proc/{k}/cmdline").read_bytes()]
    except OSError:
        return []


def journaled(results: Path) -> int:
    """Request lines the workers have journaled so far (under the hidden .workers-* folder)."""
    return sum(len(p.read_text().splitlines()) for p in results.glob(".workers-*/shard-*/*/requests.jsonl"))


def test_killed_worker_requests_are_merged(engine: str, tmp_path: Path) -> None:
    results = tmp_path / "results"
    cmd = [
        *(sys.executable, "-m", "loadgen.cli.main", "run", "--target", "sim", "--base-url", engine),
        *("--num-prompts", str(REQUESTS), "--rate", str(RATE), "--profile", "short", "--warmup", "0"),
        *("--results-dir", str(results), "--metrics-port", "0", "--linger", "0", "--quiet", "--json"),
        *("--workers", "2"),
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    victim = None
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and journaled(results) < 20:  # both sending, lines on disk
            time.sleep(0.1)
        victim = spawned_workers(proc.pid)[-1]
        os.kill(victim, signal.SIGKILL)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, err
    summary = json.loads(out)
    reason = summary["partial_reason"]
    assert summary["partial"] is True
    assert f"(pid {victim}) killed by SIGKILL" in reason, reason
    assert f"(pid {victim}) killed by SIGKILL" in err  # said when it happened
    dead = int(reason.split("worker ", 1)[1].split(" ", 1)[0])
    (run,) = [p for p in results.iterdir() if p.is_dir() and not p.name.startswith(".")]
    lines = [json.loads(x) for x in (run / "requests.jsonl").read_text().splitlines()]
    theirs = [x for x in lines if x["index"] % 2 == dead]
    assert len(theirs) >= 5  # the dead worker's finished requests are in the merged record
    assert len(lines) == summary["requests"]["total"]
    assert sum(summary["requests"]["by_outcome"].values()) == len(lines)
    assert summary["host_stalls"]["count"] >= 0  # the surviving worker's, carried into the merge
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["partial"] is True
    assert manifest["shards"]["not_whole"][str(dead)].startswith(
        f"worker {dead} (pid {victim}) killed by SIGKILL"
    )
    with sqlite3.connect(results / "infergauge.db") as db:
        (row,) = db.execute("SELECT requests_ok, requests_failed, partial FROM runs").fetchall()
    assert row[0] + row[1] == summary["requests"]["measured"]
    assert bool(row[2])
