"""Shared test fixtures: paths to the golden captures from real engines."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
FIXTURES = REPO_ROOT / "tests" / "fixtures"
GOLDEN = FIXTURES / "golden"  # copied from shared/golden: vLLM 0.26.0 and SGLang 0.5.14 on an H200
GOLDEN_VLLM = GOLDEN / "vllm-0.26.0"
GOLDEN_SGLANG = GOLDEN / "sglang-0.5.14"


@pytest.fixture
def golden_vllm() -> Path:
    return GOLDEN_VLLM


@pytest.fixture
def golden_sglang() -> Path:
    return GOLDEN_SGLANG
