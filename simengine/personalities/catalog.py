"""The personalities the simulated engine can play, as data (names, defaults it starts with).

Plain data with no imports of the personality modules, so the configuration can read it without a
circle (the personality modules import the configuration).
"""

from __future__ import annotations

from typing import Any

from infergauge.engines import get as engine_spec

DEFAULT = "vllm"  # `--personality` when none is given
# what each personality starts with unless a flag says otherwise (its engine's defaults)
STARTS_WITH: dict[str, dict[str, Any]] = {
    "vllm": {"engine_version": "0.33.0+sim"},
    "sglang": {"engine_version": "0.5.23+sim", "block_size": 1},  # SGLang's --page-size default
    "llamacpp": {"engine_version": "b8000-sim"},  # llama-server's build_info: b<build>-<commit>
}
NAMES = tuple(STARTS_WITH)


def default_port(personality: str) -> int:
    """The port the engine it plays listens on by default (vLLM 8000, SGLang 30000)."""
    return engine_spec(personality).default_port
