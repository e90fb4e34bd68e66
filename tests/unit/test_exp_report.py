"""Reports from stored runs: charts exist, the results table matches the summaries, facts are computed."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from loadgen.analysis.costs import cost_per_million_tokens, max_num_seqs_advice
from loadgen.analysis.series import request_latencies
from loadgen.analysis.slo import parse_objective
from loadgen.report.markdown import ReportOptions, workload_mismatches, write_report
from loadgen.results.rundir import load_run, write_json


def _store(root: Path, run_id: str, engine: str, conc: int, rps: float, p99: float) -> None:
    summary = {
        "run_id": run_id,
        "engine": engine,
        "target": engine,
        "max_concurrency": conc,
        "asked_rate": "inf",
        "started_at": "2026-11-29T19:00:00Z",
        "ended_at": "2026-11-29T19:01:00Z",
        "request_throughput": rps,
        "output_token_throughput": rps * 64,
        "total_token_throughput": rps * 128,
        "goodput": rps,
        "error_rate": 0.0,
        "requests": {"failed": 0},
        "partial": False,
        "ttft_s": {"p50": p99 / 4, "p90": p99 / 3, "p99": p99 / 2},
        "tpot_s": {"p50": 0.01, "p90": 0.012, "p99": 0.015},
        "e2e_s": {"p50": p99 / 2, "p90": p99 * 0.8, "p99": p99},
    }
    manifest = {
        "run_id": run_id,
        "engine": {"engine": engine, "version": "1.0", "params": {"max_num_seqs": 8}},
        "config": {"input_len": "fixed:64", "output_len": "fixed:64", "num_prompts": 32, "seed": 42},
        "workload": {"fingerprint": "f"},
        "cache": {"flushed": True, "method": "restart"},
        "experiment": {"engine": engine, "workload": "short", "phase": "baseline"},
    }
    write_json(root / run_id / "summary.json", summary)
    write_json(root / run_id / "manifest.json", manifest)
    # half the lines as loadgen writes them (ttft_s, tpot_s), half with only the raw ns stamps:
    # TTFT = first - sent; TPOT = (last - first) / (tokens - 1)
    lines = [{"outcome": "ok", "warmup": False, "ttft_s": 0.05 + i * 1e-3, "tpot_s": 0.01} for i in range(10)]
    lines += [
        {
            "outcome": "ok",
            "warmup": False,
            "sent_ns": 0,
            "first_token_ns": int(0.05e9 + i * 1e6),
            "last_token_ns": int(0.05e9 + i * 1e6 + 63 * 10e6),
            "output_tokens": 64,
        }
        for i in range(10)
    ]
    lines.append({"outcome": "timeout", "warmup": False, "ttft_s": 9.0})
    (root / run_id / "requests.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))


@pytest.fixture
def runs(tmp_path: Path) -> list:
    curve = [(1, 1.0, 1.0), (4, 4.0, 1.0), (8, 8.0, 1.0), (16, 8.0, 2.0), (32, 8.0, 4.0)]  # cap at 8
    for engine in ("vllm", "sglang"):
        for conc, rps, p99 in curve:
            _store(tmp_path, f"{engine}-{conc}", engine, conc, rps, p99)
    return [load_run(tmp_path, f"{e}-{c}") for e in ("vllm", "sglang") for c, _, _ in curve]


def test_report_files_tables_and_facts(runs, tmp_path):
    out = tmp_path / "report"
    options = ReportOptions(
        title="t",
        purpose="compare",
        experiment_ids=("exp-1",),
        objective=parse_objective("e2e_p99=1500ms"),
        cost_per_hour=20.0,
    )
    text = write_report(runs, out, options).read_text()
    for png in (
        "throughput_vs_p99_concurrency.png",
        "latency_vs_concurrency.png",
        "ttft_tpot_distribution_concurrency.png",
    ):
        data = (out / png).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
        assert len(data) > 10_000
        assert f"]({png})" in text
    headings = ("## Environment", "## Parameters", "## Results", "## Charts", "## Facts for the conclusion")
    for heading in headings:
        assert heading in text
    rows = list(csv.DictReader((out / "results.csv").open()))
    assert len(rows) == len(runs)
    by_id = {r["run_id"]: r for r in rows}
    for record in runs:
        row = by_id[record.run_id]
        assert float(row["request_throughput_rps"]) == record.summary["request_throughput"]
        assert float(row["output_token_throughput_tps"]) == record.summary["output_token_throughput"]
        assert f"| {record.run_id} |" in text
    assert "Knee: concurrency 8" in text
    # SLA 1.5 s lies halfway between c=8 (1 s) and c=16 (2 s): concurrency 12, 8 req/s = 512 tok/s
    assert "512.0 output tok/s, 8.00 req/s at concurrency 12 (interpolated)" in text
    # advice: floor(12 x 0.8) = 9; cost at 512 tok/s: 20 / 3600 x 1e6 / 512 = 10.851
    assert "max_num_seqs <= 9" in text
    assert "10.851" in text


def test_different_workloads_side_by_side_are_flagged(runs):
    assert workload_mismatches(runs) == []
    runs[-1].manifest["workload"]["fingerprint"] = "other"  # sglang at concurrency 32
    (warning,) = workload_mismatches(runs)  # runs recorded before the definition fingerprint
    for r in runs:
        r.manifest["workload"]["definition_fingerprint"] = "d"
    assert workload_mismatches(runs) == []  # item 8: same definition, a different sequence sent
    runs[-1].manifest["workload"]["definition_fingerprint"] = "other"
    (warning,) = workload_mismatches(runs)
    assert "used different workloads" in warning
    assert "sglang-32" in warning
    assert "vllm-32" in warning


def test_exporter_warnings_reach_the_report(runs, tmp_path):
    runs[0].manifest["exporter"] = {
        "checks": [
            {"id": "clocks", "severity": "warning", "message": "GPU 0 throttled: HW slowdown"},
            {"id": "persistence", "severity": "info", "message": "persistence mode on"},
        ]
    }
    text = write_report(runs[:1], tmp_path / "r", ReportOptions(title="t")).read_text()
    assert "- exporter warning: GPU 0 throttled: HW slowdown (runs vllm-1)" in text
    assert "persistence mode on" not in text


def test_request_latencies_read_both_forms(runs):
    ttft, tpot = request_latencies(runs[0].requests_path)
    assert len(ttft) == 20  # the timeout is not a measured ok request
    assert len(tpot) == 20
    assert tpot == pytest.approx([0.01] * 20)
    assert max(ttft) == pytest.approx(0.059)


def test_cost_formula_matches_the_seed():
    # the seed's example: 20 per hour at 2000 tok/s = 2.78 per million tokens
    assert cost_per_million_tokens(20, 2000) == pytest.approx(2.7778, abs=1e-4)
    assert cost_per_million_tokens(20, 0) is None
    assert max_num_seqs_advice(64) == 51
    assert max_num_seqs_advice(None) is None


def test_cache_hits_and_warm_runs_reach_the_report(runs, tmp_path):
    # issue 11 item 5: a run meant to be cold (restarted) that hit 750 of 1000 prompt tokens
    runs[0].manifest["cache"].update(hit_tokens=750, queried_tokens=1000, hit_ratio=0.75)
    runs[1].manifest["cache"].update(hit_tokens=0, queried_tokens=1000, hit_ratio=0.0)
    out = tmp_path / "r"
    text = write_report(runs[:2], out, ReportOptions(title="t")).read_text()
    assert "| 750 (75%) |" in text
    assert "| 0 (0%) |" in text
    assert "- run vllm-1 measured a warm prefix cache: 750 of 1000 prompt tokens (75%)" in text
    assert "run vllm-4 measured" not in text
    rows = list(csv.DictReader((out / "results.csv").open()))
    assert [float(r["cache_hit_ratio"]) for r in rows] == [0.75, 0.0]
    assert [int(float(r["cache_hit_tokens"])) for r in rows] == [750, 0]
