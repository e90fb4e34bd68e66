"""Any OpenAI-compatible server: `--base-url` is required; no engine-specific extras are sent."""

from __future__ import annotations

from loadgen.targets.base import Target


class OpenAITarget(Target):
    """A generic OpenAI-compatible endpoint (no `ignore_eos`, no metadata beyond /v1/models)."""

    name = "openai"
    engine = "openai"
    default_base_url = None
