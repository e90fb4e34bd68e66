"""Run records that survive what users do to them (issue 11): an unwritable or full results dir,
kill -9 mid-run, a second Ctrl-C, the umask; each test runs the real `loadgen` in a subprocess."""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from loadgen.config import RunConfig
from loadgen.results.rundir import list_runs, load_run, write_json
from loadgen.run.runner import run_benchmark
from tests.loadgen_servers import FakeEngine, ServerThread, free_port, serve

pytestmark = pytest.mark.timeout(90)
REPO = Path(__file__).resolve().parents[2]
LOADGEN = [sys.executable, "-m", "loadgen.cli.main"]


def _run_args(base_url: str, results: Path, *extra: str) -> list[str]:
    return [
        *LOADGEN,
        "--target",
        "openai",
        "--base-url",
        base_url,
        "--metrics-port",
        "0",
        "--linger",
        "0",
        "--quiet",
        "--results-dir",
        str(results),
        *extra,
    ]


@contextlib.contextmanager
def _tmpfs(path: Path, *options: str) -> Iterator[Path]:
    """A small tmpfs mounted at `path` (skips where mounting is not allowed), unmounted after."""
    path.mkdir()
    opts = ",".join(options)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(path)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def test_item1_results_dir_under_a_file_fails_before_anything_is_sent(tmp_path: Path) -> None:
    engine = FakeEngine()
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory\n")
    with ServerThread(engine.app) as server:
        done = subprocess.run(
            _run_args(server.base_url, blocker / "results", "--num-prompts", "5"),
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 2, done.stderr
    lines = [x for x in (done.stdout + done.stderr).splitlines() if x.strip()]
    assert lines == [
        f"Error: cannot write results to {str(blocker / 'results')!r} (Not a directory): "
        "pass another --results-dir"
    ]
    assert engine.streams == []  # nothing sent


def test_item1_read_only_results_dir_fails_before_anything_is_sent(tmp_path: Path) -> None:
    engine = FakeEngine()
    with _tmpfs(tmp_path / "ro", "ro", "size=64k") as ro, ServerThread(engine.app) as server:
        done = subprocess.run(
            _run_args(server.base_url, ro, "--num-prompts", "5"), cwd=REPO, capture_output=True, text=True
        )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == (
        f"Error: cannot write results to {str(ro)!r} (Read-only file system): pass another --results-dir"
    )
    assert engine.streams == []


def test_item1_full_disk_prints_the_summary_and_names_what_was_not_written(tmp_path: Path) -> None:
    engine = FakeEngine(ttft_s=0.001, itl_s=0.0005)
    with _tmpfs(tmp_path / "full", "size=64k") as full, ServerThread(engine.app) as server:
        args = ["--num-prompts", "400", "--output-len", "fixed:64", "--json"]
        done = subprocess.run(
            _run_args(server.base_url, full, *args), cwd=REPO, capture_output=True, text=True
        )
        left = sorted(p.name for p in full.rglob("*") if p.is_file())
        (run_id,) = list_runs(full)
        kept = load_run(full, run_id)  # the start manifest and the journal's lines: a crashed run
    assert done.returncode == 3, done.stderr
    assert "Traceback" not in done.stderr
    summary = json.loads(done.stdout)  # the measurements reach the user
    assert summary["requests"]["ok"] == 400
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("Error: not written under ")
    for name in ("requests.jsonl", "summary.json", "manifest.json", "runs.csv"):
        assert f"{name} (No space left on device)" in last
    assert "summary.json" not in left
    assert "runs.csv" not in left
    assert kept.manifest["status"] == "crashed"
    assert kept.summary["partial"] is kept.summary["crashed"] is True
    assert 0 < kept.summary["requests"]["total"] < 400  # what the journal wrote before the disk filled


def _wait_for_lines(path: Path, n: int, proc: subprocess.Popen[str], timeout_s: float = 40.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        if path.is_file() and path.read_text().count("\n") >= n:
            return
        time.sleep(0.05)
    raise AssertionError(f"fewer than {n} lines in {path} (loadgen exit {proc.poll()})")


def test_item2_kill_9_mid_run_leaves_a_crashed_record_that_report_and_diff_read(tmp_path: Path) -> None:
    results = tmp_path / "results"
    args = [*LOADGEN, "--target", "sim", "--rate", "40", "--duration", "60", "--profile", "short"]
    args += ["--metrics-port", "0", "--quiet", "--results-dir", str(results)]
    proc = subprocess.Popen(args, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        manifest_path = None
        deadline = time.monotonic() + 40
        while manifest_path is None and time.monotonic() < deadline:
            manifest_path = next(results.glob("*/manifest.json"), None) if results.is_dir() else None
            time.sleep(0.05)
        assert manifest_path is not None, proc.stderr
        assert json.loads(manifest_path.read_text())["status"] == "running"  # written before the load
        _wait_for_lines(manifest_path.parent / "requests.jsonl", 5, proc)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.communicate(timeout=30)
    run_dir = manifest_path.parent
    assert not (run_dir / "summary.json").exists()
    lines = (run_dir / "requests.jsonl").read_text().splitlines()
    record = load_run(results, run_dir.name)
    assert record.summary["crashed"] is True
    assert record.summary["partial"] is True
    assert record.summary["requests"]["total"] == len(lines) > 0
    assert record.summary["ttft_s"]["count"] > 0
    assert list_runs(results) == [run_dir.name]
    report = subprocess.run(
        [*LOADGEN, "report", run_dir.name, "--results-dir", str(results)],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert report.returncode == 0, report.stderr
    text = next((results / "reports").rglob("report.md")).read_text()
    assert f"run {run_dir.name} is partial: crashed" in text
    diff = subprocess.run(
        [*LOADGEN, "diff", run_dir.name, run_dir.name, "--results-dir", str(results)],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert diff.returncode == 0, diff.stderr
    assert "run A is partial" in diff.stdout


async def test_item2_a_rebuilt_summary_has_the_figures_the_run_wrote(tmp_path: Path) -> None:
    engine = FakeEngine(ttft_s=0.005, itl_s=0.002, plan=["ok", "ok", "ok", "http_error"])
    async with serve(engine.app()) as url:
        config = RunConfig(
            target="openai",
            base_url=url,
            metrics_port=0,
            linger_s=0.0,
            results_dir=str(tmp_path),
            input_len="fixed:16",
            output_len="fixed:8",
            num_prompts=40,
            warmup=3,
            rate=100.0,
            max_concurrency=2,  # requests wait for a slot: the slot wait is rebuilt too
            max_error_rate=1.0,
            slo={"ttft_s": 0.5},
        )
        result = await run_benchmark(config, progress=False)
    manifest = json.loads((result.result_dir / "manifest.json").read_text())
    assert manifest["status"] == "complete"
    (result.result_dir / "summary.json").unlink()
    write_json(result.result_dir / "manifest.json", {**manifest, "status": "running"})
    rebuilt = load_run(tmp_path, result.run_id).summary
    assert rebuilt["crashed"] is True
    assert result.summary["slot_wait_s"]["max"] > 0
    same = ("requests", "error_rate", "duration_s", "total_output_tokens", "goodput", "achieved_rate")
    for key in (
        *same,
        "ttft_s",
        "tpot_s",
        "itl_s",
        "e2e_s",
        "schedule_lag_s",
        "slot_wait_s",
        "output_token_throughput",
    ):
        assert rebuilt[key] == result.summary[key], key  # exact: the ns are rebuilt exactly


def _sim_run(results: Path, *extra: str) -> subprocess.Popen[str]:
    args = [*LOADGEN, "--target", "sim", "--quiet", "--results-dir", str(results), *extra]
    return subprocess.Popen(args, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _read_until(stream: IO[str], needle: str, timeout_s: float = 40.0) -> str:
    seen, deadline = "", time.monotonic() + timeout_s
    while needle not in seen and time.monotonic() < deadline:
        line = stream.readline()
        if not line:
            break
        seen += line
    assert needle in seen, seen
    return seen


def test_item3_second_ctrl_c_mid_run_exits_1_with_a_complete_record_and_no_linger(tmp_path: Path) -> None:
    engine = FakeEngine(ttft_s=0.01, itl_s=0.05)  # 200 tokens: each request would take 10 s
    with ServerThread(engine.app) as server:
        args = ["--num-prompts", "40", "--max-concurrency", "4", "--output-len", "fixed:200"]
        args = [*_run_args(server.base_url, tmp_path, *args)]
        args[args.index("--linger") + 1] = "30"
        args[args.index("--metrics-port") + 1] = str(free_port())
        proc = subprocess.Popen(args, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 30
        while len(engine.streams) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        time.sleep(0.01)
        proc.send_signal(signal.SIGINT)  # before the record is written: absorbed, and no 30 s linger
        began = time.monotonic()
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 1, err
    assert time.monotonic() - began < 15
    assert "PARTIAL RESULT: interrupted by SIGINT" in out
    (run_id,) = list_runs(tmp_path)
    record = load_run(tmp_path, run_id)
    assert record.manifest["status"] == "complete"
    assert record.summary["requests"]["by_outcome"]["cancelled"] == 4


def test_item3_and_16_ctrl_c_twice_in_the_linger_keeps_the_runs_code(tmp_path: Path) -> None:
    port = free_port()
    proc = _sim_run(
        tmp_path, "--num-prompts", "20", "--rate", "50", "--metrics-port", str(port), "--linger", "30"
    )
    assert proc.stderr is not None
    assert proc.stdout is not None
    err = _read_until(proc.stderr, "metrics stay up for 30 s")
    assert f":{port}/metrics" in err
    ready, _, _ = select.select([proc.stdout.fileno()], [], [], 5)
    printed = os.read(proc.stdout.fileno(), 1 << 20).decode() if ready else ""
    assert "Successful requests:" in printed  # the summary came before the linger, not after it
    proc.send_signal(signal.SIGINT)  # ends the linger
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)  # lands while loadgen shuts down: was exit 130 (killed by SIGINT)
    proc.communicate(timeout=30)
    assert proc.returncode == 0
    (run_id,) = list_runs(tmp_path)
    assert load_run(tmp_path, run_id).manifest["status"] == "complete"


def test_item16_version_works_from_a_checkout_without_an_installed_distribution(tmp_path: Path) -> None:
    import tomllib

    import click

    import loadgen

    # only the two packages on the path, no site-packages: no `infergauge` distribution metadata
    (tmp_path / "loadgen").symlink_to(REPO / "loadgen")
    (tmp_path / "click").symlink_to(Path(click.__file__).parent)
    env = {"PYTHONPATH": str(tmp_path), "PATH": os.environ.get("PATH", "")}
    done = subprocess.run(
        [sys.executable, "-S", "-m", "loadgen.cli.main", "--version"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"loadgen, version {loadgen.__version__}"
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert pyproject["project"]["version"] == loadgen.__version__


def test_item16_make_demo_runs_while_the_default_metrics_port_is_taken(tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        with contextlib.suppress(OSError):  # already taken by someone else is as good
            taken.bind(("0.0.0.0", RunConfig().metrics_port))  # the default port, read, not named
            taken.listen()
        venv = Path(sys.executable).parent.parent
        args = ["make", "-s", "demo", "DEMO_SECONDS=2", f"DEMO_RESULTS={tmp_path}", f"VENV={venv}"]
        done = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=80)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("live metrics: http://127.0.0.1:")
    assert len(list_runs(tmp_path)) == 1
