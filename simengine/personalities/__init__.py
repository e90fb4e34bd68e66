"""Engine personalities: one module per engine, chosen by `--personality` from this registry."""

from __future__ import annotations

from simengine.personalities.sglang import SglangPersonality
from simengine.personalities.vllm import VllmPersonality

PERSONALITIES: dict[str, type[VllmPersonality] | type[SglangPersonality]] = {
    "vllm": VllmPersonality,
    "sglang": SglangPersonality,
}
