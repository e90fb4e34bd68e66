"""The simulated engine (simengine), started in-process on a free port: the embedded default target.

It speaks with a vLLM or SGLang personality (`--sim-personality`); its metadata is read as that
engine's (recognised by content) and reported as engine `simengine`, the personality kept in
`server_args["personality"]`.
"""

from __future__ import annotations

import dataclasses

from infergauge import engines
from loadgen.records import EngineMetadata
from loadgen.targets.base import FlushResult
from loadgen.targets.preset import (
    EnginePreset,
    fetch_bodies,
    flush_with,
    metadata_from_bodies,
    with_info_metric,
)
from loadgen.transport.plainhttp import HttpSession

DEFAULT_PERSONALITY = engines.get("simengine").plays[0]  # simengine's own default (`--personality`)


class SimTarget(EnginePreset):
    """simengine (in-process); `base_url` comes from the embedded server once it has started."""

    name = "sim"
    engine = "simengine"
    default_base_url = None
    supports_ignore_eos = True
    hint = "the embedded simulated engine did not answer"

    async def fetch_metadata(self, session: HttpSession, base_url: str) -> EngineMetadata:
        """The personality's metadata, labelled `simengine`."""
        meta = metadata_from_bodies(self.engine, await fetch_bodies(session, base_url))
        meta = await with_info_metric(session, base_url, meta)
        args = {"personality": meta.speaks, **meta.server_args}
        return dataclasses.replace(meta, server_args=args)

    async def flush_cache(self, session: HttpSession, base_url: str) -> FlushResult:
        """Flush through the personality's endpoint."""
        spoken = (await self.fetch_metadata(session, base_url)).speaks
        return await flush_with(engines.get(spoken or self.engine), session, base_url)
