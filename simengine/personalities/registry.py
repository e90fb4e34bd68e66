"""The personality registry: `--personality` name -> its class."""

from __future__ import annotations

from simengine.personalities.sglang import SglangPersonality
from simengine.personalities.vllm import VllmPersonality

PERSONALITIES: dict[str, type[VllmPersonality] | type[SglangPersonality]] = {
    "vllm": VllmPersonality,
    "sglang": SglangPersonality,
}
