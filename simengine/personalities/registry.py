"""The personality registry: `--personality` name -> its class."""

from __future__ import annotations

from simengine.personalities.llamacpp import LlamacppPersonality
from simengine.personalities.sglang import SglangPersonality
from simengine.personalities.vllm import VllmPersonality

PERSONALITIES: dict[str, type[VllmPersonality] | type[SglangPersonality] | type[LlamacppPersonality]] = {
    "vllm": VllmPersonality,
    "sglang": SglangPersonality,
    "llamacpp": LlamacppPersonality,
}
