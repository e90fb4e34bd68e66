"""Report and runs.csv figures from real runs (issue 11 items 7, 8, 9): measured tokens per request
beside the configured lengths, comparability by workload definition, a numeric results.csv."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

import pytest

from loadgen.config import RunConfig
from loadgen.report.markdown import ReportOptions, workload_mismatches, write_report
from loadgen.report.results_csv import NUMERIC_COLUMNS, TEXT_COLUMNS
from loadgen.results.rundir import RUNS_CSV, RunRecord, load_run
from loadgen.run.runner import run_benchmark_sync
from tests.loadgen_servers import FakeEngine, ServerThread

pytestmark = pytest.mark.timeout(60)


def _config(base_url: str, results: Path, **kw: Any) -> RunConfig:
    defaults: dict[str, Any] = {
        "target": "openai",
        "base_url": base_url,
        "endpoint": "chat",  # text prompts: the server's prompt count is not the configured length
        "metrics_port": 0,
        "linger_s": 0.0,
        "results_dir": str(results),
        "input_len": "fixed:16",
        "output_len": "fixed:6",
        "rate": 40.0,
        "arrival": "constant",
        "scenario": "s",
    }
    return RunConfig(**{**defaults, **kw})


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[RunRecord]]:
    """Two duration-bounded runs of one workload and seed: the longer one sends more requests."""
    results = tmp_path_factory.mktemp("results")
    with ServerThread(FakeEngine(ttft_s=0.003, itl_s=0.001).app) as server:
        ids = [
            run_benchmark_sync(_config(server.base_url, results, duration_s=seconds), progress=False).run_id
            for seconds in (0.3, 0.6)
        ]
    return results, [load_run(results, run_id) for run_id in ids]


def _lines(record: RunRecord) -> list[dict[str, Any]]:
    return [json.loads(x) for x in record.requests_path.read_text().splitlines()]


def test_item8_duration_bounded_runs_share_a_definition(pair: tuple[Path, list[RunRecord]]) -> None:
    _, (short, long) = pair
    assert short.summary["requests"]["total"] < long.summary["requests"]["total"]  # 12 vs 24 sent
    wl_short, wl_long = short.manifest["workload"], long.manifest["workload"]
    assert wl_short["fingerprint"] != wl_long["fingerprint"]  # the sequences sent differ ...
    assert wl_short["definition_fingerprint"] == wl_long["definition_fingerprint"]  # ... not the definition
    assert workload_mismatches([short, long]) == []  # no "different workloads" warning


def test_item7_measured_tokens_beside_the_configured(pair: tuple[Path, list[RunRecord]]) -> None:
    results, records = pair
    rows = {row["run_id"]: row for row in csv.DictReader((results / RUNS_CSV).open())}
    for record in records:
        ok = [x for x in _lines(record) if x["outcome"] == "ok" and not x["warmup"]]
        mean_prompt = sum(x["prompt_tokens"] for x in ok) / len(ok)  # the server's usage counts
        assert record.summary["mean_prompt_tokens"] == pytest.approx(mean_prompt)
        assert record.summary["mean_prompt_tokens"] != 16  # the chat template's words count too
        assert record.summary["mean_output_tokens"] == pytest.approx(6.0)
        row = rows[record.run_id]
        assert (row["input_len"], row["output_len"]) == ("fixed:16", "fixed:6")
        assert float(row["mean_prompt_tokens"]) == pytest.approx(mean_prompt)
        assert float(row["slot_wait_p99_s"]) == 0.0  # no concurrency cap: no slot wait (item 6)
        assert row["workload_definition_fingerprint"] == record.manifest["workload"]["definition_fingerprint"]
    text = write_report(records, results / "report", ReportOptions(title="t")).read_text()
    assert f"| fixed:16 / {records[0].summary['mean_prompt_tokens']:.0f} |" in text
    assert "| fixed:6 / 6 |" in text


def test_item9_results_csv_is_numeric(pair: tuple[Path, list[RunRecord]]) -> None:
    results, records = pair
    out = results / "report9"
    write_report(records, out, ReportOptions(title="t"))
    with (out / "results.csv").open(newline="") as fh:
        reader = csv.DictReader(fh)
        assert tuple(reader.fieldnames or ()) == (*TEXT_COLUMNS, *NUMERIC_COLUMNS)
        rows = list(reader)
    assert [row["run_id"] for row in rows] == [r.run_id for r in records]  # one row per run
    for row, record in zip(rows, records, strict=True):
        numbers = {k: float(row[k]) for k in NUMERIC_COLUMNS if row[k] != ""}  # every number parses
        # empty: no cap, no SLO, no flush asked, and a fake engine serves no prefix-cache counters
        empty = {"concurrency", "goodput_rps", "cache_flushed", "cache_hit_tokens", "cache_hit_ratio"}
        assert set(NUMERIC_COLUMNS) - set(numbers) == empty
        assert numbers["ttft_p50_s"] == record.summary["ttft_s"]["p50"]  # exact, in seconds
        assert numbers["errors"] == 0
        assert numbers["error_rate"] == 0.0
        assert numbers["rate_rps"] == numbers["load"] == 40.0
        assert numbers["requests"] == record.summary["requests"]["measured"]
        assert not any(math.isnan(v) for v in numbers.values())
        assert row["load_kind"] == "rate"
