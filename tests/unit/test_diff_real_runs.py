"""`loadgen diff` over two real run records (vLLM 0.26.0 default launch vs SGLang 0.5.14, both 64
running requests, tests/fixtures/real-runs/): a handful of rows, the engine first, no false
max_num_seqs row (before: 628 rows, the first 28 naming artefacts such as max_running_requests)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from loadgen.analysis.diff import manifest_differences

RUNS = Path(__file__).parents[1] / "fixtures" / "real-runs"
# rows a reader takes in at a glance: the facts that differ plus a few context groups
SMALL = 10


def _load(run: str) -> tuple[dict, dict]:
    return tuple(json.loads((RUNS / run / f"{part}.json").read_text()) for part in ("manifest", "summary"))


@pytest.fixture(scope="module")
def runs() -> tuple[dict, dict, dict, dict]:
    (ma, sa), (mb, sb) = _load("vllm64-lg-r20"), _load("sglang-lg-r20")
    return ma, sa, mb, sb


def test_real_vllm_vs_sglang_lists_few_rows_engine_first(runs):
    ma, sa, mb, sb = runs
    assert ma["engine"]["params"] == {}  # default vLLM: only the exporter saw the launch flags
    diffs = manifest_differences(ma, mb, sa, sb)
    assert len(diffs) <= SMALL, [d.key for d in diffs]
    assert (diffs[0].key, diffs[0].a, diffs[0].b) == ("engine.engine", "vllm 0.26.0", "sglang 0.5.14")
    keys = [d.key for d in diffs] + [x.key for d in diffs for x in d.details]
    assert not [k for k in keys if k.rsplit(".", 1)[-1] in ("max_num_seqs", "max_running_requests")]
    # neutral params that truly differ (vLLM's block 16 vs SGLang's page 1) are rows, read from the exporter
    block = next(d for d in diffs if d.key == "engine.params.block_size")
    assert (block.a, block.b) == (16, 1)
    assert block.details[0].a.startswith("exporter.engines[served].")
    groups = [d.group for d in diffs]
    last_fact = max(i for i, g in enumerate(groups) if g != "context")
    assert "context" not in groups[:last_fact]  # raw args only below every fact


def test_a_model_change_ranks_in_the_top_three(runs):
    ma, sa, mb, sb = runs
    mb = copy.deepcopy(mb)
    mb["engine"]["model"] = "tiny-llama-14b"  # both real runs served tiny-llama; rename one side
    diffs = manifest_differences(ma, mb, sa, sb)
    top = [d.key for d in diffs[:3]]
    assert "engine.model" in top
    assert "engine.engine" in top
    assert len(diffs) <= SMALL


def test_real_same_engine_story_names_max_num_seqs_first_once():
    (ma, sa), (mb, sb) = _load("vllm64-lg-r20"), _load("vllm8-lg-r20")
    diffs = manifest_differences(ma, mb, sa, sb)
    assert (diffs[0].key, diffs[0].a, diffs[0].b) == ("engine.params.max_num_seqs", 64, 8)
    assert diffs[0].details[0].a.startswith("exporter.engines[served].")  # default vLLM: the exporter's view
    keys = [d.key for d in diffs] + [x.key for d in diffs for x in d.details]
    assert [k for k in keys if k.rsplit(".", 1)[-1] == "max_num_seqs"] == ["engine.params.max_num_seqs"]
    assert [d.group for d in diffs[1:]] == ["context"] * (len(diffs) - 1)
