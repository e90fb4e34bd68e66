"""Issue 22 item 2: `kill -9` of a `--workers` coordinator. Its workers stop with it (the Linux
parent-death signal, a parent-pid watch as the fallback) instead of sending the rest of the
schedule, and the next `loadgen store import` (or `loadgen run`) finds the hidden `.workers-*`
folder and rebuilds the run from the workers' records: crashed, partial, every journaled request."""

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

from tests.integration.test_reliab_killed_worker import journaled, spawned_workers

pytestmark = pytest.mark.timeout(180)
STOP_BOUND_S = 30.0  # the workers stop within this of the kill (signal + record; busy host)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _loadgen(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "loadgen.cli.main", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=90, check=False)


@pytest.mark.parametrize("rebuilder", ["store import", "run"])
def test_killed_coordinator_workers_stop_and_the_run_is_rebuilt_as_crashed(
    engine: str, tmp_path: Path, rebuilder: str
) -> None:
    results = tmp_path / "results"
    cmd = [
        *(sys.executable, "-m", "loadgen.cli.main", "run", "--target", "sim", "--base-url", engine),
        *("--num-prompts", "600", "--rate", "20", "--profile", "short", "--warmup", "0"),
        *("--results-dir", str(results), "--metrics-port", "0", "--linger", "0", "--quiet"),
        *("--workers", "2"),
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and journaled(results) < 20:
            time.sleep(0.1)
        workers = spawned_workers(proc.pid)
        assert len(workers) == 2
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)
        killed_at = time.monotonic()
        while any(_alive(w) for w in workers) and time.monotonic() - killed_at < STOP_BOUND_S:
            time.sleep(0.1)
        assert not any(_alive(w) for w in workers), "workers outlived their coordinator"
    finally:
        if proc.poll() is None:
            proc.kill()
    hidden = [p for p in results.iterdir() if p.name.startswith(".workers-")]
    assert len(hidden) == 1
    assert [p for p in results.iterdir() if p.is_dir() and not p.name.startswith(".")] == []
    on_disk = journaled(results)
    assert 20 <= on_disk < 600  # the rest of the schedule was not sent
    if rebuilder == "run":  # the next run on that results dir rebuilds it first
        args = ["run", "--target", "sim", "--base-url", engine, "--num-prompts", "2", "--rate", "20"]
        imported = _loadgen(*args, "--results-dir", str(results), "--metrics-port", "0", "--quiet")
    else:
        imported = _loadgen("store", "import", str(results))
    assert imported.returncode == 0, imported.stderr
    assert "rebuilt run" in imported.stderr
    hidden_id = hidden[0].name[len(".workers-") :].rsplit("-", 1)[0]
    run = results / hidden_id
    manifest = json.loads((run / "manifest.json").read_text())
    summary = json.loads((run / "summary.json").read_text())
    assert (manifest["status"], manifest["partial"], summary["crashed"]) == ("crashed", True, True)
    assert "coordinator" in summary["partial_reason"]
    lines = (run / "requests.jsonl").read_text().splitlines()
    assert len(lines) == on_disk == summary["requests"]["total"]
    with sqlite3.connect(results / "infergauge.db") as db:
        rows = db.execute("SELECT status FROM runs WHERE run_id = ?", (hidden_id,)).fetchall()
    assert rows == [("crashed",)]
    again = _loadgen("store", "import", str(results))  # rebuilt once: the folder now exists
    assert "rebuilt run" not in again.stderr
