"""The simulated engine (simengine), started in-process on a free port: the embedded default target.

It speaks with a vLLM or SGLang personality (`--sim-personality`); metadata comes from whichever
personality answers, reported as engine `simengine`.
"""

from __future__ import annotations

import aiohttp

from loadgen.targets.base import EngineMetadata, FlushResult, Target
from loadgen.targets.sglang import SGLangTarget
from loadgen.targets.vllm import VLLMTarget


class SimTarget(Target):
    """simengine (in-process); `base_url` comes from the embedded server once it has started."""

    name = "sim"
    engine = "simengine"
    default_base_url = None
    supports_ignore_eos = True
    hint = "the embedded simulated engine did not answer"

    async def _personality(self, session: aiohttp.ClientSession, base_url: str) -> Target:
        probe = await VLLMTarget().fetch_metadata(session, base_url)
        return VLLMTarget() if probe.version else SGLangTarget()

    async def fetch_metadata(self, session: aiohttp.ClientSession, base_url: str) -> EngineMetadata:
        """The personality's metadata, relabelled `simengine` (personality kept in server_args)."""
        inner = await self._personality(session, base_url)
        meta = await inner.fetch_metadata(session, base_url)
        args = {"personality": inner.engine, **meta.server_args}
        return EngineMetadata(
            "simengine", meta.version, meta.model, meta.max_model_len, args, meta.models, meta.sources
        )

    async def flush_cache(self, session: aiohttp.ClientSession, base_url: str) -> FlushResult:
        """Flush through the personality's endpoint."""
        return await (await self._personality(session, base_url)).flush_cache(session, base_url)
