"""One workload run three ways against one simulated engine (loopback): as one process, as
`--workers 4`, and as 3 shards (`--shard i/3 --start-at T`, separate processes) merged with
`loadgen merge`. The same request sequence and schedule, every request once, and merged percentiles
equal to numpy's over the union of the shards' raw samples; a missing shard makes the merge partial;
a shard of another run is refused; a `--workers` worker runs on its own core beside the coordinator's."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.loadgen_servers import free_port
from tests.loadgen_servers import loadgen_process as loadgen

pytestmark = pytest.mark.timeout(120)
REQUESTS = 24
SHARDS = 3
RUN_ID = "20261201T000000Z-shards"


def workload(base_url: str, results: Path, seed: int = 7) -> list[str]:
    """The one workload of these tests (small, bounded, exact lengths)."""
    return [
        "run",
        *("--target", "sim", "--base-url", base_url, "--seed", str(seed)),
        *("--num-prompts", str(REQUESTS), "--rate", "60", "--profile", "short", "--warmup", "2"),
        *("--metrics-port", "0", "--results-dir", str(results), "--quiet", "--json"),
    ]


def start_shards(base_url: str, root: Path, which: range, seed: int = 7) -> list[subprocess.Popen[str]]:
    """Shards `which` of SHARDS, started together against one common start two seconds ahead."""
    start = (datetime.now(UTC) + timedelta(seconds=3)).strftime("%Y-%m-%dT%H:%M:%SZ")
    procs = []
    for i in which:
        args = [*workload(base_url, root / f"shard-{i}", seed), "--shard", f"{i}/{SHARDS}"]
        args += ["--start-at", start, "--run-id", RUN_ID]
        cmd = [sys.executable, "-m", "loadgen.cli.main", *args]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    for proc in procs:
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    return procs


def run_dir(results: Path) -> Path:
    """The one run folder under a results dir."""
    (found,) = [p for p in results.iterdir() if p.is_dir() and not p.name.startswith(".")]
    return found


def manifest(folder: Path) -> dict[str, Any]:
    return dict(json.loads((folder / "manifest.json").read_text()))


def lines(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (folder / "requests.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def runs(engine: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The workload as one process, as --workers 4 and as 3 shards merged."""
    root = tmp_path_factory.mktemp("shards")
    single = loadgen(*workload(engine, root / "single"))
    assert single.returncode == 0, single.stderr
    workers = loadgen(*workload(engine, root / "workers"), "--workers", "4")
    assert workers.returncode == 0, workers.stderr
    start_shards(engine, root, range(SHARDS))
    shard_dirs = [str(run_dir(root / f"shard-{i}")) for i in range(SHARDS)]
    merged = loadgen("merge", "--results-dir", str(root / "merged"), *shard_dirs)
    assert merged.returncode == 0, merged.stderr
    return {
        "root": root,
        "single": run_dir(root / "single"),
        "workers": run_dir(root / "workers"),
        "merged": run_dir(root / "merged"),
        **{f"shard-{i}": Path(shard_dirs[i]) for i in range(SHARDS)},
    }


@pytest.mark.parametrize("way", ["workers", "merged"])
def test_the_same_request_sequence_and_schedule_as_one_process(runs: dict[str, Path], way: str) -> None:
    one, other = manifest(runs["single"])["workload"], manifest(runs[way])["workload"]
    assert (other["fingerprint"], other["schedule_fingerprint"]) == (
        one["fingerprint"],
        one["schedule_fingerprint"],
    )


@pytest.mark.parametrize("way", ["single", "workers", "merged"])
def test_every_request_once_in_index_order(runs: dict[str, Path], way: str) -> None:
    assert [x["index"] for x in lines(runs[way])] == list(range(REQUESTS + 2))


def test_each_shard_sent_its_round_robin_slice(runs: dict[str, Path]) -> None:
    for i in range(SHARDS):
        assert [x["index"] for x in lines(runs[f"shard-{i}"])] == list(range(i, REQUESTS + 2, SHARDS))


@pytest.mark.parametrize("metric", ["ttft_s", "tpot_s", "e2e_s", "schedule_lag_s"])
def test_merged_percentiles_are_numpys_over_the_union_of_the_shards(
    runs: dict[str, Path], metric: str
) -> None:
    union = [x for i in range(SHARDS) for x in lines(runs[f"shard-{i}"]) if not x["warmup"]]
    values = [
        x[metric]
        for x in union
        if x[metric] is not None and (metric == "schedule_lag_s" or x["outcome"] == "ok")
    ]
    summary = json.loads((runs["merged"] / "summary.json").read_text())
    for q in (50, 90, 95, 99):
        assert summary[metric][f"p{q}"] == pytest.approx(np.percentile(values, q, method="linear"), abs=1e-12)


def test_merged_itl_percentiles_are_numpys_over_every_gap(runs: dict[str, Path]) -> None:
    union = [
        x
        for i in range(SHARDS)
        for x in lines(runs[f"shard-{i}"])
        if not x["warmup"] and x["outcome"] == "ok"
    ]
    gaps = [g for x in union for g in x["itl_s"]]
    summary = json.loads((runs["merged"] / "summary.json").read_text())
    assert summary["itl_s"]["p99"] == pytest.approx(np.percentile(gaps, 99, method="linear"), abs=1e-9)


def test_merged_run_is_one_runs_csv_row_with_its_skew(runs: dict[str, Path]) -> None:
    rows = (runs["root"] / "merged" / "runs.csv").read_text().splitlines()
    assert len(rows) == 2
    assert rows[1].startswith(RUN_ID)
    skew = manifest(runs["merged"])["shards"]["skew"]
    assert sorted(skew["first_send_lag_s"]) == ["0", "1", "2"]
    assert skew["spread_s"] >= 0


def test_a_missing_shard_makes_the_merge_partial_and_names_it(runs: dict[str, Path], tmp_path: Path) -> None:
    result = loadgen(
        "merge", "--results-dir", str(tmp_path), str(runs["shard-0"]), str(runs["shard-2"]), "--json"
    )
    assert result.returncode == 1, result.stderr
    summary = json.loads(result.stdout)
    assert summary["partial"] is True
    assert "1 missing" in summary["partial_reason"]
    assert summary["requests"]["total"] == len(lines(runs["shard-0"])) + len(lines(runs["shard-2"]))


def test_a_shard_of_another_run_is_refused_in_one_line(
    engine: str, runs: dict[str, Path], tmp_path: Path
) -> None:
    start_shards(engine, tmp_path, range(2, 3), seed=8)  # same run id, another seed
    stranger = run_dir(tmp_path / "shard-2")
    out = tmp_path / "merged"
    result = loadgen(
        "merge", "--results-dir", str(out), str(runs["shard-0"]), str(runs["shard-1"]), str(stranger)
    )
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert "run fingerprint" in result.stderr
    assert "not one run" in result.stderr
    assert not out.exists()


def test_a_record_given_twice_is_refused(runs: dict[str, Path], tmp_path: Path) -> None:
    copy = tmp_path / "copy" / runs["shard-1"].name
    shutil.copytree(runs["shard-1"], copy)
    result = loadgen("merge", "--results-dir", str(tmp_path / "m"), str(runs["shard-1"]), str(copy))
    assert result.returncode == 2
    assert "shard 1 given twice" in result.stderr


def test_workers_drive_an_external_openai_server(engine: str, runs: dict[str, Path], tmp_path: Path) -> None:
    args = workload(engine, tmp_path, seed=7)
    args[args.index("sim")] = "openai"
    result = loadgen(*args, "--workers", "2", "--max-concurrency", "3")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert (summary["requests"]["ok"], summary["max_concurrency"]) == (REQUESTS, 3)
    assert (
        manifest(run_dir(tmp_path))["workload"]["fingerprint"]
        == manifest(runs["single"])["workload"]["fingerprint"]
    )


def test_workers_record_says_what_the_user_ran(runs: dict[str, Path]) -> None:
    config = manifest(runs["workers"])["config"]
    assert (config["results_dir"], config["max_concurrency"]) == (str(runs["root"] / "workers"), None)
    assert not [p for p in (runs["root"] / "workers").iterdir() if p.name.startswith(".workers-")]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--shard", "3/3"], "invalid --shard '3/3'"),
        (["--shard-from-env", "--shards", "2"], "JOB_COMPLETION_INDEX is not set"),
        (["--workers", "0"], "invalid --workers '0'"),
        (["--workers", "2", "--shard", "0/2"], "give it or --shard, not both"),
        (["--workers", "3", "--max-concurrency", "2"], "invalid --max-concurrency 2: below --workers 3"),
        (["--shard", "0/2", "--start-at", "noon"], "invalid --start-at 'noon'"),
        (
            ["--shard", "0/2", "--duration", "5", "--max-concurrency", "2", "--rate", "inf"],
            "needs a known schedule",
        ),
        (["--workers", "2", "--target", "vllm", "--base-url", "http://127.0.0.1:9"], "127.0.0.1:9"),
        (["--shard", "0/2", "--start-at", "2026-01-01T00:00:00Z"], "passed"),
    ],
)
def test_bad_scale_out_flags_are_one_line_and_exit_2(args: list[str], message: str, tmp_path: Path) -> None:
    result = loadgen("run", "--metrics-port", "0", "--results-dir", str(tmp_path / "r"), *args, timeout=30)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().count("\n") == 0
    assert message in result.stderr
    assert not (tmp_path / "r").exists() or not any((tmp_path / "r").iterdir())


def test_sigterm_to_a_workers_run_leaves_one_partial_merged_record(engine: str, tmp_path: Path) -> None:
    args = workload(engine, tmp_path, seed=7)
    args[args.index(str(REQUESTS))] = "400"  # 20 s at 20 req/s: still sending when the signal comes
    args[args.index("60")] = "20"
    cmd = [sys.executable, "-m", "loadgen.cli.main", *args, "--workers", "2"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(7)  # past the common start (about 3.5 s ahead)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err
    summary = json.loads(out)
    assert summary["partial_reason"].count("interrupted by SIGTERM") == 2
    assert 0 < summary["requests"]["total"] < 402
    indices = [x["index"] for x in lines(run_dir(tmp_path))]
    assert indices == sorted(set(indices))  # each once, in order (the shards stopped at about one index)
    assert len(indices) == summary["requests"]["total"]


def test_a_workers_run_is_one_grafana_annotation(engine: str, tmp_path: Path) -> None:
    from tests.integration.test_stack_support import FakeGrafana

    with FakeGrafana("glsa_test_token") as grafana:
        cmd = [sys.executable, "-m", "loadgen.cli.main", *workload(engine, tmp_path), "--workers", "2"]
        env = {**os.environ, "GRAFANA_URL": grafana.url, "GRAFANA_TOKEN": "glsa_test_token"}
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env, check=False)
    assert result.returncode == 0, result.stderr
    assert [(method, path.split("/")[2]) for method, path, _ in grafana.requests] == [
        ("POST", "annotations"),
        ("PATCH", "annotations"),
    ]
    assert not grafana.problems


def scrape(port: int) -> dict[str, float]:
    """The coordinator's /metrics as {sample with labels: value} (empty when not up)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as response:
            text = response.read().decode()
    except OSError:
        return {}
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[s.name + json.dumps(s.labels, sort_keys=True)] = s.value
    return out


def test_a_workers_run_serves_one_summed_metrics_endpoint(engine: str, tmp_path: Path) -> None:
    port = free_port()
    args = workload(engine, tmp_path)
    args[args.index("--metrics-port") + 1] = str(port)
    cmd = [sys.executable, "-m", "loadgen.cli.main", *args, "--workers", "2", "--linger", "5"]
    cmd += ["--metrics-listen-address", "127.0.0.1"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline, seen = time.monotonic() + 40, {}
        while time.monotonic() < deadline:
            seen = scrape(port)
            if any(k.startswith("loadgen_run_end_timestamp_seconds") and v > 0 for k, v in seen.items()):
                break
            time.sleep(0.2)
    finally:
        proc.communicate(timeout=60)
    ok = [v for k, v in seen.items() if k.startswith("loadgen_requests_total") and '"outcome": "ok"' in k]
    assert ok == [REQUESTS + 2]  # one series, every request (warm-up included) of both workers
    assert not [k for k in seen if "worker" in k or "shard" in k]
    assert proc.returncode == 0


def _allowed_cpus(pid: int) -> str:
    status = Path(f"/proc/{pid}/status").read_text()
    return next(
        line.split(":", 1)[1].strip() for line in status.splitlines() if line.startswith("Cpus_allowed_list")
    )


def _spawned_children(pid: int) -> list[int]:
    """The coordinator's worker processes (multiprocessing spawn children, not its resource tracker)."""
    try:
        kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        return [int(k) for k in kids if b"spawn_main" in Path(f"/proc/{k}/cmdline").read_bytes()]
    except OSError:  # a process that has just exited
        return []


@pytest.mark.skipif(
    not hasattr(os, "sched_getaffinity") or len(os.sched_getaffinity(0)) < 2, reason="needs two cores"
)
def test_a_worker_runs_on_its_own_core_beside_the_coordinators(engine: str, tmp_path: Path) -> None:
    first, second = sorted(os.sched_getaffinity(0))[:2]
    args = workload(engine, tmp_path, seed=7)
    args[args.index("60")] = "8"  # 3 s of sending: time to look at the processes
    cmd = [sys.executable, "-m", "loadgen.cli.main", *args, "--workers", "1"]
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: os.sched_setaffinity(0, {first, second}),
    )
    seen: dict[str, str] = {}
    allowed = ""
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(seen) < 2:
            workers = _spawned_children(proc.pid)
            with contextlib.suppress(OSError, StopIteration):
                allowed = _allowed_cpus(workers[0]) if workers else ""
            if allowed == str(second):  # the worker pins itself
                seen = {"worker": _allowed_cpus(workers[0]), "coordinator": _allowed_cpus(proc.pid)}
                if seen["coordinator"] != str(first):
                    seen = {}  # the coordinator pins itself just after starting the worker
            time.sleep(0.05)
    finally:
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert seen == {"worker": str(second), "coordinator": str(first)}
    cores = manifest(run_dir(tmp_path))["workers"]["cores"]
    assert (cores["coordinator"], cores["workers"]) == ([first], [second])
