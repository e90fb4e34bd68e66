"""Launch-line translation vLLM <-> SGLang on the golden captures' real command lines."""

from __future__ import annotations

import shlex

import pytest
from click.testing import CliRunner

from loadgen.analysis.align import AlignError, compare_params, translate, undecided
from loadgen.cli.align import align
from tests.conftest import GOLDEN_SGLANG, GOLDEN_VLLM

SEED_VLLM = (
    "vllm serve m --tensor-parallel-size 2 --max-num-seqs 128 --gpu-memory-utilization 0.90 "
    "--block-size 16 --enable-chunked-prefill --max-model-len 4096 --port 8000"
)


def test_seed_vllm_line_translates_to_sglang():
    result = translate(shlex.split(SEED_VLLM))
    argv = result.argv
    assert argv[:3] == ["python", "-m", "sglang.launch_server"]
    expected = (
        ("--tp-size", "2"),
        ("--max-running-requests", "128"),
        ("--mem-fraction-static", "0.9"),
        ("--context-length", "4096"),
        ("--page-size", "16"),
        ("--port", "8000"),
        ("--model-path", "m"),
    )
    for flag, value in expected:
        assert argv[argv.index(flag) + 1] == value
    assert any(w.startswith("gpu_memory_utilization: approximate") for w in result.warnings)


def test_golden_sglang_line_translates_to_vllm_and_warns_on_dropped_flags():
    line = (GOLDEN_SGLANG / "command.txt").read_text()
    result = translate(shlex.split(line))
    assert result.target == "vllm"
    assert result.argv[:3] == ["vllm", "serve", "/tmp/tiny-llama"]
    assert "--gpu-memory-utilization" in result.argv
    assert "--max-model-len" in result.argv
    assert "--attention-backend: no vllm equivalent; dropped" in result.warnings


def test_golden_vllm_line_round_trips_its_mapped_flags():
    there = translate(shlex.split((GOLDEN_VLLM / "command.txt").read_text()))
    back = translate(there.argv)
    assert back.argv[back.argv.index("--gpu-memory-utilization") + 1] == "0.5"
    assert back.argv[back.argv.index("--max-model-len") + 1] == "2048"


def test_chunked_prefill_size_maps_to_batched_tokens():
    result = translate(
        ["python", "-m", "sglang.launch_server", "--model-path", "m", "--chunked-prefill-size", "4096"]
    )
    assert result.argv[result.argv.index("--max-num-batched-tokens") + 1] == "4096"


def test_api_key_is_redacted_and_bad_lines_rejected():
    result = translate(["vllm", "serve", "m", "--api-key", "sk-secret"])
    assert "sk-secret" not in result.command
    with pytest.raises(AlignError, match="not a launch line of a known engine"):
        translate(["nginx", "-g", "daemon off;"])


def test_compare_params_reports_differences_and_auto():
    diffs = compare_params(
        {"max_num_seqs": 64, "block_size": 16, "max_num_batched_tokens": "auto"},
        {"max_num_seqs": 8, "block_size": 16, "max_num_batched_tokens": "auto"},
    )
    assert [(d.param, d.a, d.b) for d in diffs] == [("max_num_seqs", 64, 8)]
    assert undecided({"max_num_batched_tokens": "auto"}, {}) == ["max_num_batched_tokens"]


def test_cli_translates_and_exits_2_on_bad_input():
    runner = CliRunner()
    ok = runner.invoke(align, ["--to", "sglang", *shlex.split(SEED_VLLM)])
    assert ok.exit_code == 0
    assert "--max-running-requests 128" in ok.stdout
    bad = runner.invoke(align, ["foo", "bar"])
    assert bad.exit_code == 2
    assert "not a launch line of a known engine" in bad.output
