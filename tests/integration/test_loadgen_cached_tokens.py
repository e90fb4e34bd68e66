"""Cached tokens end to end: `loadgen run` of a shared-prefix workload against a real simulated vLLM
that reports `prompt_tokens_details`; the per-request `cached_tokens` in requests.jsonl, the three
figures of the run's `cache` facts (reported, engine counters, implied) agree for a cold run; a
second run of the same prompts on the same engine is warm, and `loadgen diff` names the cache state
first."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from loadgen.cli.main import cli
from simengine.embedded import EmbeddedEngine

pytestmark = pytest.mark.timeout(120)
NUM, PREFIX, BODY = 12, 64, 20  # 12 prompts: one of 2 shared 64-token prefixes + 20 own tokens


@pytest.fixture
def engine() -> Iterator[EmbeddedEngine]:
    flags = ["--personality", "vllm", "--time-scale", "20", "--enable-prompt-tokens-details"]
    with EmbeddedEngine(flags) as sim:
        yield sim


def _run(engine: EmbeddedEngine, results: Path) -> tuple[str, dict[str, Any], dict[str, Any], list[dict]]:
    args = ["--target", "vllm", "--base-url", engine.base_url, "--seed", "3", "--num-prompts", str(NUM)]
    args += ["--workload", "shared-prefix", "--shared-prefix-len", str(PREFIX), "--shared-prefix-groups", "2"]
    args += ["--input-len", f"fixed:{BODY}", "--output-len", "fixed:2", "--max-concurrency", "1"]
    args += ["--warmup", "0", "--metrics-port", "0", "--results-dir", str(results), "--json"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    run_dir = max(
        (p for p in results.iterdir() if (p / "summary.json").exists()), key=lambda p: p.stat().st_mtime
    )
    manifest = json.loads((run_dir / "manifest.json").read_text())
    summary = json.loads((run_dir / "summary.json").read_text())
    lines = [json.loads(line) for line in (run_dir / "requests.jsonl").read_text().splitlines()]
    return run_dir.name, manifest, summary, lines


def test_cold_run_figures_agree_and_a_warm_rerun_is_named_first_by_diff(
    engine: EmbeddedEngine, tmp_path: Path
) -> None:
    cold_id, cold, cold_summary, lines = _run(engine, tmp_path)
    # one at a time: the first prompt of each prefix group misses, every later one hits its 4 prefix
    # blocks (64 tokens); its own 20 tokens are new
    by_index = sorted(lines, key=lambda x: x["index"])
    assert [x["cached_tokens"] for x in by_index] == [0, 0] + [PREFIX] * (NUM - 2)
    cache = cold["cache"]
    assert {k: v for k, v in cache.items() if k not in ("flushed", "method", "detail")} == cold_summary[
        "cache"
    ]
    total = NUM * (PREFIX + BODY)  # 1008 prompt tokens
    assert cache["reported"] == {
        "requests_with_details": NUM,
        "cached_tokens": 640,  # 10 * 64
        "prompt_tokens": total,
        "hit_ratio": pytest.approx(640 / total),
        "cached_share_of_input": pytest.approx(640 / total),
    }
    assert (cache["hit_tokens"], cache["queried_tokens"]) == (640, total)  # vllm:prefix_cache_* counters
    implied = cache["implied"]
    assert implied["block_size"] == 16
    assert implied["block_size_from"] == "engine"
    assert (implied["cached_tokens"], implied["prompt_tokens"]) == (640, total)

    warm_id, warm, _, warm_lines = _run(engine, tmp_path)  # same prompts, same engine: its cache is warm
    # now all 5 full blocks of every prompt are cached: (84 - 1) // 16 = 5 blocks = 80 tokens
    assert [x["cached_tokens"] for x in warm_lines] == [80] * NUM
    assert warm["cache"]["reported"]["hit_ratio"] == pytest.approx(80 / 84)
    assert warm["cache"]["implied"]["hit_ratio"] == pytest.approx(640 / total)  # the workload is the same
    out = CliRunner().invoke(cli, ["diff", cold_id, warm_id, "--results-dir", str(tmp_path), "--json"])
    assert out.exit_code == 0, out.output
    rows = json.loads(out.output)["differences"]
    first = rows[0]
    assert (first["key"], first["group"]) == ("cache.hit_ratio", "cache_state")
    assert (first["a"], first["b"]) == (round(640 / total, 3), round(80 / 84, 3))
    details = {d["key"]: (d["a"], d["b"]) for d in first["details"]}
    assert details["cache.implied.hit_ratio"] == (round(640 / total, 3),) * 2
    assert not [r for r in rows[1:] if r["key"].startswith("cache.") and "hit_ratio" in r["key"]]
