"""The Kubernetes sharded run end to end, on loopback: the rendered shard Job's `loadgen run` args run
as 3 real processes (JOB_COMPLETION_INDEX 0-2) against the real simulated engine, each writing its
row to the results store, then the rendered merge Job's script (`loadgen merge --store`). The store
holds one merged run with all 300 requests and three rows marked as shards, which the baseline
history and the Baselines dashboard's SQL never read as runs. Once on SQLite and once on the real
PostgreSQL (the store docs/kubernetes.md documents)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from loadgen.baseline.history import read_history
from loadgen.store.db import open_store
from loadgen.store.schema import WHOLE_RUNS
from loadgen.store.url import parse_store
from tests.loadgen_servers import free_port
from tests.store_support import Backend

pytestmark = pytest.mark.timeout(240)
REQUESTS = 300
SHARDS = 3
RUN_ID = "20261201T020000Z-k8s-shards"
REPO = Path(__file__).resolve().parents[2]
SHARDS_OVERLAY = REPO / "deploy" / "kubernetes" / "overlays" / "loadgen-shards"


def loadgen_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "loadgen.cli.main", *args]


def startup_s() -> float:
    """How long one loadgen process takes to start here (the machine may be busy)."""
    begin = time.monotonic()
    subprocess.run(loadgen_cmd("run", "--help"), capture_output=True, check=True, timeout=120)
    return time.monotonic() - begin


def rendered() -> dict[str, Any]:
    """The loadgen-shards overlay as `kubectl kustomize` renders it: {kind/name: object}."""
    kubectl = Path(sys.prefix) / "bin" / "kubectl"
    out = subprocess.run(
        [str(kubectl if kubectl.is_file() else "kubectl"), "kustomize", str(SHARDS_OVERLAY)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    objects = [o for o in yaml.safe_load_all(out) if o]
    return {f"{o['kind']}/{re.sub(r'-[a-z0-9]{10}$', '', o['metadata']['name'])}": o for o in objects}


def container(job: dict[str, Any]) -> dict[str, Any]:
    (found,) = job["spec"]["template"]["spec"]["containers"]
    return dict(found)


def shard_args(objects: dict[str, Any], root: Path, env: dict[str, str]) -> list[str]:
    """The shard pod's `loadgen run` arguments with Kubernetes' $(VAR) expanded, the ConfigMap's
    run.yaml and the volume under `root`, then what this machine needs instead of the cluster: the
    simulated engine, loopback live metrics on a free port, a 300-request run, no exporter."""
    shard = container(objects["Job/loadgen-shards"])
    config = root / "etc" / "run.yaml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(objects["ConfigMap/loadgen-run-config"]["data"]["run.yaml"])
    args = [
        re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], a)
        .replace("/etc/infergauge/", f"{config.parent}/")
        .replace("/work/", f"{root}/")
        for a in shard["args"]
    ]
    assert shard["command"] == ["loadgen", "run"]
    return [*shard["command"][1:], *args]


def run_shards(engine: str, root: Path, store: str, objects: dict[str, Any]) -> dict[str, str]:
    """The Indexed Job's pods: SHARDS processes from one START_AT, each JOB_COMPLETION_INDEX its own
    results dir on the volume and the one store; the merge Job's environment."""
    # a common start far enough ahead that every shard is up (a shard later than 1 s refuses to run)
    lead = max(4.0, 4 * startup_s())
    start = (datetime.now(UTC) + timedelta(seconds=lead)).strftime("%Y-%m-%dT%H:%M:%SZ")
    run_name = objects["ConfigMap/loadgen-run"]["data"]["RUN_NAME"]
    env = {"RUN_NAME": run_name, "SHARDS": str(SHARDS), "START_AT": start, "LOADGEN_STORE": store}
    local = ["--target", "sim", "--base-url", engine, "--seed", "42", "--profile", "short", "--linger", "0"]
    local += ["--num-prompts", str(REQUESTS), "--rate", "150", "--warmup", "0", "--run-id", RUN_ID]
    local += ["--metrics-port", "0", "--metrics-listen-address", "127.0.0.1"]  # loopback here
    local += ["--exporter-url", f"http://127.0.0.1:{free_port()}"]  # nothing listens: no exporter facts
    procs = []
    for i in range(SHARDS):
        pod_env = {**os.environ, **env, "JOB_COMPLETION_INDEX": str(i), "MPLCONFIGDIR": str(root)}
        args = [*shard_args(objects, root, pod_env), *local]
        procs.append(
            subprocess.Popen(
                loadgen_cmd(*args), stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, env=pod_env
            )
        )
    for proc in procs:
        _, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err.decode()
    return env


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
    """3 shards run, then the merge Job's own script (its command and args as rendered); the
    results dir and the store."""
    objects = rendered()
    env = run_shards(engine, tmp_path, backend.url, objects)
    merge = container(objects["Job/loadgen-merge"])
    assert merge["workingDir"] == "/work"  # the script's results/ is the volume under it: tmp_path here
    path = f"{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}"  # loadgen on PATH
    merged = subprocess.run(
        [*merge["command"], *merge["args"]],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=tmp_path,
        env={**env, "MERGE_WAIT_S": "60", "PATH": path, "MPLCONFIGDIR": str(tmp_path)},
    )
    assert merged.returncode == 0, merged.stderr
    assert "warning" not in merged.stderr  # the store took the row
    run_root = tmp_path / "results" / env["RUN_NAME"]
    merge_without_the_last_shard(merge, run_root, {**env, "PATH": path, "MPLCONFIGDIR": str(tmp_path)})
    return backend, run_root


def merge_without_the_last_shard(merge: dict[str, Any], run_root: Path, env: dict[str, str]) -> None:
    """The merge script once START_AT + MERGE_WAIT_S passed with a shard's record missing (only an
    earlier run's folder there): it says which, merges the rest and exits 1 (partial), which the
    Job's podFailurePolicy ends the Job on."""
    other = run_root.parent.parent / "lost" / "results" / env["RUN_NAME"]
    for i in range(SHARDS - 1):
        shutil.copytree(run_root / f"shard-{i}", other / f"shard-{i}")
    # the last shard's folder is an earlier run's under the same RUN_NAME (finished before START_AT)
    stale = other / f"shard-{SHARDS - 1}" / "20261130T020000Z-earlier"
    shutil.copytree(run_root / f"shard-{SHARDS - 1}" / RUN_ID, stale)
    day_before = time.time() - 86400
    os.utime(stale / "summary.json", (day_before, day_before))
    result = subprocess.run(
        [*merge["command"], *merge["args"]],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=other.parent.parent,
        env={**env, "MERGE_WAIT_S": "0", "LOADGEN_STORE": "none"},
    )
    assert result.returncode == 1, result.stderr
    assert f"shard {SHARDS - 1} wrote no record by START_AT + 0s: merging without it" in result.stderr
    assert "partial: shards not whole: 2 missing" in result.stderr


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
