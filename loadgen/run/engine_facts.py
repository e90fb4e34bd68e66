"""Effective parameters of a live engine (HTTP metadata, optionally the exporter's manifest) or of a
stored run (its manifest), for `loadgen align --check`.

The engine is recognised from what its metadata bodies contain (`detect_http`), never from which
endpoint answered first (a vLLM in dev mode answers `/server_info` like SGLang does), and its
parameters come from the one resolution (`loadgen.results.manifest.resolved_params`).
"""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass, field
from typing import Any

from loadgen.results.manifest import resolved_params
from loadgen.results.rundir import load_run
from loadgen.targets.exporter_client import fetch_exporter_manifest, match_engine
from loadgen.targets.preset import fetch_bodies, metadata_from_bodies, with_info_metric
from loadgen.transport.plainhttp import PlainSession


@dataclass(frozen=True)
class EngineFacts:
    """Who the engine is and its neutral parameters; `source` says where they came from."""

    label: str
    engine: str | None
    version: str | None
    model: str | None
    params: dict[str, Any] = field(default_factory=dict)
    source: str = ""
    param_sources: dict[str, str] = field(default_factory=dict)


async def _from_url(url: str, exporter_url: str | None) -> EngineFacts:
    base = url.rstrip("/")
    async with PlainSession() as session:
        bodies = await fetch_bodies(session, base)
        exporter = (await fetch_exporter_manifest(session, exporter_url))[0] if exporter_url else None
    meta = metadata_from_bodies("", bodies)
    if meta.speaks is None:
        raise ConnectionError(f"no known engine's metadata at {url!r} (is the engine running?)")
    meta = dataclasses.replace(meta, engine=meta.speaks)
    async with PlainSession() as session:
        meta = await with_info_metric(session, base, meta)
    watched = match_engine((exporter or {}).get("engines") or [], base)
    resolved = resolved_params(meta, watched, exporter)
    source = f"exporter {exporter_url} + engine HTTP" if watched else "engine HTTP metadata"
    params = resolved.params if resolved else {}
    sources = resolved.param_sources if resolved else {}
    return EngineFacts(url, meta.engine, meta.version, meta.model, params, source, sources)


def facts_from_url(url: str, exporter_url: str | None = None) -> EngineFacts:
    """Ask a live engine (and optionally its exporter) for its effective parameters."""
    return asyncio.run(_from_url(url, exporter_url))


def facts_from_run(results_dir: str, run_id: str) -> EngineFacts:
    """The engine facts a stored run recorded (raises RunNotFound for an unknown id)."""
    m = load_run(results_dir, run_id).typed
    engine = m.engine
    watched = match_engine([dict(e.raw) for e in m.exporter.engines], engine.base_url or "")
    # as recorded, `auto` kept: align says which values an engine decides at start-up (undecided)
    params = engine.params or (watched or {}).get("params") or {}
    return EngineFacts(
        run_id,
        engine.engine,
        engine.version,
        engine.model,
        dict(params),
        f"run {run_id} manifest",
        dict(engine.param_sources),
    )


def identity_differences(a: EngineFacts, b: EngineFacts) -> list[tuple[str, Any, Any]]:
    """Engine, version and model when they differ."""
    pairs = (("engine", a.engine, b.engine), ("version", a.version, b.version), ("model", a.model, b.model))
    return [(name, x, y) for name, x, y in pairs if x != y]
