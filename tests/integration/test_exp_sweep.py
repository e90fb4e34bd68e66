"""Sweep and capacity search end to end against the embedded simulated engine.

The simulated engine runs at most `--max-num-seqs 4` requests at once, so throughput stops growing
at concurrency 4: that is the knee the sweep must find. `--time-scale 2` keeps each 64/64 request
near 170 ms of wall time with few enough SSE chunks per second that the figures stay steady even
when the suite runs in parallel on two cores.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

from click.testing import CliRunner

from loadgen.cli.capacity import capacity
from loadgen.cli.report import report
from loadgen.cli.sweep import sweep
from loadgen.experiments.state import load_state
from loadgen.results.rundir import load_run

SIM = [
    "--sim-max-num-seqs",
    "4",
    "--sim-time-scale",
    "2",
    "--profile",
    "short",
    "--metrics-port",
    "0",
    "--quiet",
]


def _experiment_id(output: str) -> str:
    match = re.search(r"experiment (exp-\S+):", output)
    assert match, output
    return match.group(1)


def test_sweep_finds_the_knee_at_max_num_seqs_and_reports_it(tmp_path: Path):
    results = str(tmp_path)
    result = CliRunner().invoke(
        sweep,
        [
            "--concurrency",
            "1,2,4,16",
            "--num-prompts",
            "16",
            "--slo",
            "e2e_p99=10s",
            "--slo",
            "e2e_p99=1ms",
            "--results-dir",
            results,
            *SIM,
        ],
    )
    assert result.exit_code == 0, result.output
    assert "knee: concurrency 4 " in result.stdout
    assert "knee method: elasticity" in result.stdout
    assert "throughput at SLO E2E p99 <= 10 s:" in result.stdout
    assert "(held at every point)" in result.stdout
    assert "throughput at SLO E2E p99 <= 1 ms: none (not met at any load)" in result.stdout
    experiment_id = _experiment_id(result.stdout)
    state = load_state(results, experiment_id)
    assert state.status == "done"
    run_ids = state.run_ids()
    assert len(run_ids) == 4
    records = [load_run(results, run_id) for run_id in run_ids]
    # one experiment id ties the runs; same workload and seed at each point
    assert {r.summary["experiment_id"] for r in records} == {experiment_id}
    assert len({r.manifest["workload"]["fingerprint"] for r in records}) == 1
    assert [r.summary["max_concurrency"] for r in records] == [1, 2, 4, 16]
    assert all(r.manifest["cache"]["method"] == "restart" for r in records)

    out = tmp_path / "report"
    rep = CliRunner().invoke(
        report,
        [
            experiment_id,
            "--results-dir",
            results,
            "--out",
            str(out),
            "--slo",
            "e2e_p99=10s",
            "--cost-per-hour",
            "20",
        ],
    )
    assert rep.exit_code == 0, rep.output
    for png in (
        "throughput_vs_p99_concurrency.png",
        "latency_vs_concurrency.png",
        "ttft_tpot_distribution_concurrency.png",
    ):
        assert (out / png).read_bytes()[:4] == b"\x89PNG"
    rows = {row["run_id"]: row for row in csv.DictReader((out / "results.csv").open())}
    assert set(rows) == set(run_ids)
    for record in records:
        assert float(rows[record.run_id]["request_throughput_rps"]) == record.summary["request_throughput"]
    text = (out / "report.md").read_text()
    assert "Knee: concurrency 4 " in text
    assert "Cost per million output tokens" in text


def test_capacity_search_converges(tmp_path: Path):
    # cap 4, ~170 ms per request: p99 E2E ~ 170 ms x concurrency / 4, so 500 ms holds up to ~11
    result = CliRunner().invoke(
        capacity,
        [
            "--slo",
            "e2e_p99=500ms",
            "--start",
            "4",
            "--growth",
            "2",
            "--max-steps",
            "12",
            "--num-prompts",
            "32",
            "--results-dir",
            str(tmp_path),
            *SIM,
        ],
    )
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    verdict = next(line for line in lines if line.startswith("capacity at"))
    assert "stopped: converged" in verdict, result.stdout
    best = float(re.search(r"concurrency (\d+)", verdict).group(1))
    steps = [re.split(r"\s{2,}", line.strip()) for line in lines if re.match(r"^\d+\s+(ramp|narrow)", line)]
    assert any(s[1] == "narrow" for s in steps)
    met = {float(s[2]): s[4] for s in steps}
    assert met[best] == "yes"
    assert met.get(best + 1, "no") == "no"
    # the objective's limit bounds the best step, and some higher load missed it
    assert any(load > best and verdict_ == "no" for load, verdict_ in met.items())
    state = json.loads(next(tmp_path.glob("experiments/*/state.json")).read_text())
    assert len(state["runs"]) == len(steps)


def test_rate_sweep_against_a_running_engine_flushes_its_cache(tmp_path: Path):
    from simengine.embedded import EmbeddedEngine

    with EmbeddedEngine(["--personality", "sglang", "--time-scale", "20"]) as engine:
        result = CliRunner().invoke(
            sweep,
            [
                "--rate",
                "20,40",
                "--num-prompts",
                "8",
                "--profile",
                "short",
                "--target",
                "sglang",
                "--base-url",
                engine.base_url,
                "--results-dir",
                str(tmp_path),
                "--metrics-port",
                "0",
                "--quiet",
            ],
        )
    assert result.exit_code == 0, result.output
    state = load_state(tmp_path, _experiment_id(result.stdout))
    records = [load_run(tmp_path, run_id) for run_id in state.run_ids()]
    assert [r.manifest["config"]["rate"] for r in records] == [20.0, 40.0]
    assert all(r.manifest["cache"]["method"] == "POST /flush_cache" for r in records)
    assert all(r.manifest["cache"]["flushed"] is True for r in records)


def test_bad_sweep_and_report_input_exit_2(tmp_path: Path):
    both = CliRunner().invoke(sweep, ["--concurrency", "1", "--rate", "2"])
    assert both.exit_code == 2
    assert "exactly one of" in both.output
    bad = CliRunner().invoke(sweep, ["--concurrency", "1,x"])
    assert bad.exit_code == 2
    assert "invalid concurrency 'x'" in bad.output
    slo = CliRunner().invoke(capacity, ["--slo", "latency=1s"])
    assert slo.exit_code == 2
    assert "latency=1s" in slo.output
    missing = CliRunner().invoke(report, ["nope", "--results-dir", str(tmp_path)])
    assert missing.exit_code == 2
    assert "no run 'nope'" in missing.output
