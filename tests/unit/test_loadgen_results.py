"""Run ids, atomic writes, load_run / RunNotFound, runs.csv rows."""

from __future__ import annotations

import csv
import json
import os
import stat
from datetime import UTC, datetime
from pathlib import Path

import pytest

from loadgen.results.rundir import (
    CSV_COLUMNS,
    RunNotFound,
    append_runs_csv,
    atomic_write,
    csv_row,
    list_runs,
    load_run,
    new_run_id,
    write_json,
)


def test_run_ids_are_unique_and_sort_by_time() -> None:
    early = new_run_id(datetime(2026, 1, 1, tzinfo=UTC))
    late = new_run_id(datetime(2026, 1, 2, tzinfo=UTC))
    assert early < late
    assert early.startswith("20260101T000000Z-")
    assert len({new_run_id() for _ in range(200)}) == 200


def test_atomic_write_leaves_no_temp_files(tmp_path: Path) -> None:
    target = tmp_path / "a" / "x.json"
    write_json(target, {"v": float("inf")})
    atomic_write(target, "replaced\n")
    assert target.read_text() == "replaced\n"
    assert [p.name for p in target.parent.iterdir()] == ["x.json"]


def test_load_run_and_missing_run(tmp_path: Path) -> None:
    run_dir = tmp_path / "20260101T000000Z-abcdef"
    write_json(run_dir / "manifest.json", {"run_id": run_dir.name})
    write_json(run_dir / "summary.json", {"run_id": run_dir.name, "partial": False})
    record = load_run(tmp_path, run_dir.name)
    assert record.summary["partial"] is False
    assert record.requests_path == run_dir / "requests.jsonl"
    assert list_runs(tmp_path) == [run_dir.name]
    with pytest.raises(RunNotFound, match="no run 'nope' in"):
        load_run(tmp_path, "nope")


def test_runs_csv_gets_one_row_per_run_and_one_header(tmp_path: Path) -> None:
    manifest = {
        "config": {"seed": 42, "arrival": "poisson"},
        "workload": {"name": "random", "fingerprint": "sha"},
        "engine": {"version": "0.26.0", "params": {"max_num_seqs": 128}},
        "tool": {"git_sha": "abc"},
        "exporter": {"gpus": [{"name": "NVIDIA H200"}]},
    }
    summary = {
        "run_id": "r1",
        "target": "vllm",
        "ttft_s": {"p99": 0.5},
        "requests": {"ok": 3},
        "slo": {"ttft_s": 0.2},
    }
    for run_id in ("r1", "r2"):
        append_runs_csv(tmp_path, csv_row(manifest, {**summary, "run_id": run_id}, tmp_path / run_id))
    rows = list(csv.DictReader((tmp_path / "runs.csv").open()))
    assert [r["run_id"] for r in rows] == ["r1", "r2"]
    assert list(rows[0]) == list(CSV_COLUMNS)
    assert rows[0]["ttft_p99_s"] == "0.5"
    assert rows[0]["gpu_name"] == "NVIDIA H200"
    assert rows[0]["max_num_seqs"] == "128"
    assert json.loads(rows[0]["slo"]) == {"ttft_s": 0.2}


def test_runs_csv_of_an_older_version_is_realigned(tmp_path: Path) -> None:
    """New columns (item 7's mean tokens, item 6's slot wait) must not shift an older file's rows."""
    (tmp_path / "runs.csv").write_text("run_id,error_rate,retired_column\nold,0.25,x\n")
    append_runs_csv(tmp_path, csv_row({}, {"run_id": "new", "error_rate": 0.5}, tmp_path / "new"))
    rows = list(csv.DictReader((tmp_path / "runs.csv").open()))
    assert [(r["run_id"], r["error_rate"]) for r in rows] == [("old", "0.25"), ("new", "0.5")]
    assert rows[0]["retired_column"] == "x"
    assert rows[1]["retired_column"] == ""
    assert rows[0]["mean_prompt_tokens"] == ""


@pytest.mark.parametrize(
    ("url", "public"),
    [
        ("http://user:pw@host:8000/v1", "http://host:8000/v1"),
        ("https://token@example.com", "https://example.com"),
        ("http://u:p@[::1]:9/", "http://[::1]:9/"),
        ("http://127.0.0.1:8000", "http://127.0.0.1:8000"),
    ],
)
def test_public_url_drops_credentials(url: str, public: str) -> None:
    from loadgen.results.manifest import public_url

    assert public_url(url) == public


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_item17_result_files_get_the_umasks_mode(tmp_path: Path, umask: int) -> None:
    old = os.umask(umask)
    try:
        write_json(tmp_path / "summary.json", {"ok": True})
        append_runs_csv(tmp_path, {"run_id": "r1"})
        plain = tmp_path / "plain.txt"
        plain.write_text("as open() makes it\n")
    finally:
        os.umask(old)
    expected = stat.S_IMODE(plain.stat().st_mode)
    assert expected == 0o666 & ~umask
    for name in ("summary.json", "runs.csv"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == expected, name


def test_item2_a_crashed_folder_is_listed_and_its_torn_last_line_dropped(tmp_path: Path) -> None:
    from loadgen.records import RequestRecord
    from loadgen.results.record import request_text

    run_dir = tmp_path / "20260101T000000Z-c0ffee"
    manifest = {"run_id": run_dir.name, "status": "running", "started_at": "2026-01-01T00:00:00.000Z"}
    manifest["config"] = {"target": "sim", "rate": "inf", "slo": {}}
    write_json(run_dir / "manifest.json", manifest)
    start = 10**12
    lines = []
    for i in range(3):
        r = RequestRecord(i, f"x-{i}", False, start + i * 10**6, 16, 4, sent_ns=start + i * 10**6 + 1000)
        r.first_ns, r.last_ns, r.done_ns = r.sent_ns + 10**7, r.sent_ns + 4 * 10**7, r.sent_ns + 4 * 10**7
        r.token_ns = [r.sent_ns + k * 10**7 for k in range(1, 5)]
        r.output_tokens, r.outcome = 4, "ok"
        lines.append(request_text(r, start))
    (run_dir / "requests.jsonl").write_text("".join(lines) + lines[0][:17])  # killed mid-line
    write_json(tmp_path / "not-a-run" / "manifest.json", {"status": "complete"})  # no summary: not listed
    assert list_runs(tmp_path) == [run_dir.name]
    record = load_run(tmp_path, run_dir.name)
    assert record.summary["requests"]["total"] == 3
    assert record.summary["ttft_s"]["p50"] == pytest.approx(0.01)
    assert record.summary["asked_rate"] == float("inf")
    assert record.manifest["partial"] is record.manifest["crashed"] is True
    assert record.summary["ended_at"] == "2026-01-01T00:00:00.042Z"
