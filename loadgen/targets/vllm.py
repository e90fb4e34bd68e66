"""vLLM on its default port: metadata and flush from its engine spec (infergauge/engines/vllm.py)."""

from __future__ import annotations

from loadgen.targets.preset import EnginePreset, default_url


class VLLMTarget(EnginePreset):
    """vLLM's OpenAI server (`/version`, `/v1/models`, dev-mode `/server_info` and flush)."""

    name = "vllm"
    engine = "vllm"
    default_base_url = default_url("vllm")
    supports_ignore_eos = True
    hint = "is vLLM running? try --target sim"
