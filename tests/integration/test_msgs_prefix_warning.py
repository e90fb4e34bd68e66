"""Issue 22 item 14: no false `warm prefix cache ... meant to be cold (restart)` warning on
shared-prefix runs (examples/sim-phased.yaml's scenario phase, a cold first shared-prefix run on
real vLLM: 79%): the hits the workload's own shared prefixes explain are no sign of a warm cache;
hits beyond them still are."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from loadgen.cli.main import cli
from loadgen.targets.cache_counters import cache_warning
from simengine.embedded import EmbeddedEngine

pytestmark = pytest.mark.timeout(120)


def test_msgs_prefix_warning_only_for_hits_the_workload_does_not_explain() -> None:
    cold = {
        "hit_tokens": 790,
        "queried_tokens": 1000,
        "hit_ratio": 0.79,
        "flushed": True,
        "method": "restart",
    }
    # the workload's own shared prefixes imply 78% (loadgen.prefix_cache): 79% is no warm cache
    assert cache_warning("r1", {**cold, "implied": {"hit_ratio": 0.78}}) is None
    warm = cache_warning("r1", {**cold, "implied": {"hit_ratio": 0.30}})
    assert warm is not None
    assert "790 of 1000 prompt tokens (79%), where the workload's repeated prefixes explain 30%," in warm
    assert "meant to be cold (restart)" in warm
    assert cache_warning("r1", {**cold, "implied": {"hit_ratio": None}}) is not None  # not computed: 0


def _run(base_url: str, results: Path, workload: str) -> tuple[str, dict]:
    args = ["run", "--target", "vllm", "--base-url", base_url, "--workload", workload, "--num-prompts", "40"]
    args += ["--input-len", "fixed:64", "--output-len", "fixed:4", "--rate", "50", "--metrics-port", "0"]
    args += [
        "--exporter-url",
        "http://127.0.0.1:1",
        "--store",
        "none",
        "--quiet",
        "--results-dir",
        str(results),
    ]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    run_dir = max(p for p in results.iterdir() if p.is_dir())
    return result.output, json.loads((run_dir / "manifest.json").read_text())


def test_msgs_prefix_warning_not_raised_for_a_cold_shared_prefix_run(tmp_path: Path) -> None:
    with EmbeddedEngine(["--personality", "vllm", "--enable-prefix-caching"]) as engine:
        output, manifest = _run(engine.base_url, tmp_path / "a", "shared-prefix")
        assert manifest["cache"]["hit_ratio"] > 0.05  # the simulated engine served the shared prefixes
        assert manifest["cache"]["implied"]["hit_ratio"] > 0.05
        assert "measured a warm prefix cache" not in output  # before: a warning on every such run
        again, _ = _run(engine.base_url, tmp_path / "b", "random")
        again, _ = _run(engine.base_url, tmp_path / "c", "random")  # the same 40 prompts: truly warm
    assert "measured a warm prefix cache" in again
