"""Shared test fixtures: paths to the golden captures from real engines."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
FIXTURES = REPO_ROOT / "tests" / "fixtures"
GOLDEN = FIXTURES / "golden"  # copied from shared/golden: vLLM 0.26.0 and SGLang 0.5.14 on an H200
GOLDEN_VLLM = GOLDEN / "vllm-0.26.0"
GOLDEN_SGLANG = GOLDEN / "sglang-0.5.14"
GOLDEN_SSE_STREAMS = [  # the streaming captures of both engines (bytes + .timing.jsonl)
    d / f"sse_{n}.txt"
    for d in (GOLDEN_VLLM, GOLDEN_SGLANG)
    for n in ("completions", "chat", "completions_ignore_eos", "completions_continuous_usage")
]


@pytest.fixture
def golden_vllm() -> Path:
    return GOLDEN_VLLM


@pytest.fixture
def golden_sglang() -> Path:
    return GOLDEN_SGLANG
