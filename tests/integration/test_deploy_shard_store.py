"""The Kubernetes sharded run end to end, on loopback: 3 real `loadgen run --shard i/3` processes
against the real simulated engine, each writing its row to the results store, then the merge step's
command (`loadgen merge --store`). The store holds one merged run with all 300 requests and three
rows marked as shards that the baseline history and the Baselines dashboard's SQL never read as runs.
Once on SQLite and once on the real PostgreSQL (the store docs/kubernetes.md documents)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from loadgen.baseline.history import read_history
from loadgen.store.db import open_store
from loadgen.store.schema import WHOLE_RUNS
from loadgen.store.url import parse_store
from simengine.embedded import EmbeddedEngine
from tests.store_support import Backend

pytestmark = pytest.mark.timeout(240)
REQUESTS = 300
SHARDS = 3
RUN_ID = "20261201T020000Z-k8s-shards"
REPO = Path(__file__).resolve().parents[2]


def loadgen_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "loadgen.cli.main", *args]


def startup_s() -> float:
    """How long one loadgen process takes to start here (the machine may be busy)."""
    begin = time.monotonic()
    subprocess.run(loadgen_cmd("run", "--help"), capture_output=True, check=True, timeout=120)
    return time.monotonic() - begin


@pytest.fixture(scope="module")
def engine() -> Iterator[str]:
    sim = EmbeddedEngine([])
    sim.start()
    try:
        yield str(sim.base_url).rstrip("/")
    finally:
        sim.stop()


def run_shards(engine: str, root: Path, store: str) -> list[Path]:
    """The Indexed Job's pods: SHARDS processes from one --start-at, each with its own results dir
    (`results/$RUN_NAME/shard-$JOB_COMPLETION_INDEX`) and the one store."""
    # a common start far enough ahead that every shard is up (a shard later than 1 s refuses to run)
    lead = max(4.0, 4 * startup_s())
    start = (datetime.now(UTC) + timedelta(seconds=lead)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    procs = []
    for i in range(SHARDS):
        args = ["run", "--target", "sim", "--base-url", engine, "--seed", "42", "--profile", "short"]
        args += ["--num-prompts", str(REQUESTS), "--rate", "150", "--warmup", "0", "--quiet"]
        args += ["--metrics-port", "0", "--metrics-listen-address", "127.0.0.1"]
        args += ["--results-dir", str(root / f"shard-{i}"), "--store", store]
        args += ["--shard", f"{i}/{SHARDS}", "--start-at", start, "--run-id", RUN_ID]
        procs.append(subprocess.Popen(loadgen_cmd(*args), stderr=subprocess.PIPE, stdout=subprocess.DEVNULL))
    for proc in procs:
        _, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err.decode()
    return [root / f"shard-{i}" / RUN_ID for i in range(SHARDS)]


def rows(store_url: str) -> dict[str, dict[str, Any]]:
    """run_id -> (shard, status, requests, suite) of every stored run."""
    url = parse_store(store_url, ".")
    assert url is not None
    with open_store(url) as store:
        cursor = store.conn.execute(
            "SELECT run_id, shard, status, requests_ok, requests_failed, suite FROM runs ORDER BY run_id"
        )
        return {
            r[0]: {"shard": r[1], "status": r[2], "requests": (r[3] or 0) + (r[4] or 0), "suite": r[5]}
            for r in cursor.fetchall()
        }


@pytest.fixture
def stored(engine: str, backend: Backend, tmp_path: Path) -> tuple[Backend, Path]:
    """3 shards run, then the merge Job's command; the results dir and the store."""
    shard_dirs = run_shards(engine, tmp_path, backend.url)
    merged = subprocess.run(
        loadgen_cmd("merge", "--store", backend.url, "--results-dir", str(tmp_path / "merged"))
        + [str(d) for d in shard_dirs],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert merged.returncode == 0, merged.stderr
    assert "warning" not in merged.stderr  # the store took the row
    return backend, tmp_path


def test_one_merged_run_of_all_requests_and_three_shard_rows_baselines_ignore(
    stored: tuple[Backend, Path],
) -> None:
    backend, root = stored
    found = rows(backend.url)
    assert found[RUN_ID] == {"shard": None, "status": "ok", "requests": REQUESTS, "suite": None}
    shard_rows = {k: v for k, v in found.items() if k != RUN_ID}
    assert sorted(shard_rows) == [f"{RUN_ID}/shard-{i}" for i in range(SHARDS)]
    assert [v["shard"] for v in shard_rows.values()] == [f"{i}/{SHARDS}" for i in range(SHARDS)]
    assert [v["requests"] for v in shard_rows.values()] == [REQUESTS // SHARDS] * SHARDS
    summary = json.loads((root / "merged" / RUN_ID / "summary.json").read_text())
    assert summary["requests"]["total"] == REQUESTS
    # the same store, read by the baselines (one test: each sharded run costs seconds)
    baselines_never_read_a_shard_row_as_a_run(backend)


def baselines_never_read_a_shard_row_as_a_run(backend: Backend) -> None:
    """The check's history holds the merged run only, even when the shards carry a suite."""
    url = parse_store(backend.url, ".")
    assert url is not None
    with open_store(url) as store:
        # as if the sharded run were a baseline series: every row of it in one suite and series
        store.conn.execute("UPDATE runs SET suite = 'nightly', series_key = 'nightly/sharded@H200x8'")
        history = read_history(store)
        (count,) = store.conn.execute(f"SELECT COUNT(*) FROM runs WHERE {WHOLE_RUNS}").fetchone()
    assert [r.run_id for r in history[("nightly", "nightly/sharded@H200x8")]] == [RUN_ID]
    assert count == 1


def test_the_baselines_dashboard_reads_only_whole_runs() -> None:
    board = json.loads((REPO / "grafana" / "dashboards" / "baselines.json").read_text())
    text = json.dumps(board)
    queries = [q for q in _strings(board) if "FROM runs" in q and "DISTINCT" not in q]
    assert queries, text[:200]
    assert [q for q in queries if WHOLE_RUNS not in q] == []


def _strings(obj: Any) -> Iterator[str]:
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for value in obj.values():
            yield from _strings(value)
    elif isinstance(obj, list):
        for value in obj:
            yield from _strings(value)
