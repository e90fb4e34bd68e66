"""Issue 11 item 5: two same-seed runs against one kept simulated SGLang; the second is warm, and the
manifest, summary, runs.csv and the console say so."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from loadgen.cli.main import cli
from loadgen.experiments.plan import parse_plan
from loadgen.experiments.runner import ExperimentRunner
from loadgen.experiments.state import ExperimentState, experiment_dir
from loadgen.results.rundir import load_run
from loadgen.run.runner import run_benchmark_sync
from loadgen.targets.cache_counters import WARM_HIT_RATIO
from simengine.embedded import EmbeddedEngine

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
def sglang_engine() -> Iterator[EmbeddedEngine]:
    with EmbeddedEngine(["--personality", "sglang", "--time-scale", "20"]) as engine:
        yield engine


def _run(engine: EmbeddedEngine, tmp_path: Path) -> tuple[str, dict, dict]:
    args = ["--target", "sglang", "--base-url", engine.base_url, "--seed", "7", "--num-prompts", "8"]
    args += ["--input-len", "fixed:256", "--output-len", "fixed:4", "--metrics-port", "0"]
    result = CliRunner().invoke(cli, [*args, "--results-dir", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    run_dirs = sorted(
        (p for p in tmp_path.iterdir() if (p / "manifest.json").exists()), key=lambda p: p.stat().st_mtime
    )
    run_dir = run_dirs[-1]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    summary = json.loads((run_dir / "summary.json").read_text())
    return result.output, manifest, summary


def test_second_same_seed_run_is_warm_and_warned_about(sglang_engine: EmbeddedEngine, tmp_path: Path) -> None:
    first_out, first, first_summary = _run(sglang_engine, tmp_path)
    second_out, second, second_summary = _run(sglang_engine, tmp_path)
    assert first["cache"]["queried_tokens"] >= 8 * 256
    assert first["cache"]["hit_ratio"] <= WARM_HIT_RATIO
    assert "warm prefix cache" not in first_out
    assert second["cache"]["hit_ratio"] > 0.5  # the same prompts again: found in the radix cache
    assert {k: second_summary["cache"][k] for k in ("hit_tokens", "queried_tokens", "hit_ratio")} == {
        k: second["cache"][k] for k in ("hit_tokens", "queried_tokens", "hit_ratio")
    }
    # the workload itself implies no reuse (8 distinct prompts): the hits came from the run before
    implied = second["cache"]["implied"]
    assert implied["block_size"] == 1  # SGLang's page size
    assert implied["block_size_from"] == "engine"
    assert implied["prompt_tokens"] == 8 * 256
    assert implied["hit_ratio"] < 0.05 < second["cache"]["hit_ratio"]
    assert second_summary["cache"]["implied"] == implied
    assert f"run {second['run_id']} measured a warm prefix cache" in second_out
    rows = list(csv.DictReader((tmp_path / "runs.csv").open()))
    assert [float(r["cache_hit_ratio"]) for r in rows] == [
        first["cache"]["hit_ratio"],
        second["cache"]["hit_ratio"],
    ]
    assert int(rows[1]["cache_hit_tokens"]) == second["cache"]["hit_tokens"]
    assert first_summary["cache"]["hit_tokens"] == first["cache"]["hit_tokens"]


def test_a_failed_flush_on_a_default_vllm_is_warned_about(tmp_path: Path) -> None:
    """A kept vLLM outside dev mode answers 404 to the flush: the console names the fix, and the
    second run's warm cache is warned about too."""
    sim = "python -m simengine --personality vllm --port {port} --time-scale 20"
    text = (
        f"name: t\nresults_dir: {tmp_path}\n"
        "defaults: {num_prompts: 6, seed: 7, metrics_port: 0,\n"
        "           input_len: 'fixed:256', output_len: 'fixed:4'}\n"
        f"engines:\n  sim:\n    kind: launch\n    command: {sim}\n    restart_between_runs: false\n"
        "phases:\n  - {name: p, kind: baseline, workloads: [same], concurrency: [2], repetitions: 2}\n"
        "workloads:\n  same: {}\n"
    )
    plan = parse_plan(text, "plan.yaml")
    state = ExperimentState("exp-test", experiment_dir(tmp_path, "exp-test"), plan.name)
    log: list[str] = []
    fn = lambda config: run_benchmark_sync(config, progress=False)  # noqa: E731
    ExperimentRunner(plan, state, run_fn=fn, log=log.append).run()
    first, second = (load_run(tmp_path, run_id).manifest for run_id in state.run_ids())
    assert first["cache"]["method"] == "restart"
    assert first["cache"]["hit_ratio"] <= WARM_HIT_RATIO
    assert second["cache"]["flushed"] is False
    flush_warnings = [line for line in log if "prefix cache of sim not cleared" in line]
    assert len(flush_warnings) == 1
    assert "status 404" in flush_warnings[0]
    assert "VLLM_SERVER_DEV_MODE=1" in flush_warnings[0]
    assert second["cache"]["hit_ratio"] > 0.5
    warm = [line for line in log if "measured a warm prefix cache" in line]
    assert len(warm) == 1
    assert f"run {second['run_id']} measured a warm prefix cache" in warm[0]
