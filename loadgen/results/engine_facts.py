"""Effective parameters of a live engine (HTTP metadata, optionally the exporter's manifest) or of a
stored run (its manifest), for `loadgen align --check`."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from loadgen.results.manifest import fetch_exporter_manifest, neutral_params
from loadgen.results.rundir import load_run
from loadgen.targets import get_target


@dataclass(frozen=True)
class EngineFacts:
    """Who the engine is and its neutral parameters; `source` says where they came from."""

    label: str
    engine: str | None
    version: str | None
    model: str | None
    params: dict[str, Any] = field(default_factory=dict)
    source: str = ""


async def _from_url(url: str, exporter_url: str | None) -> EngineFacts:
    base = url.rstrip("/")
    async with aiohttp.ClientSession() as session:
        meta = None
        for name in ("sglang", "vllm"):  # SGLang answers /get_server_info; vLLM /version, /server_info
            candidate = await get_target(name).fetch_metadata(session, base)
            if candidate.server_args or candidate.version:
                meta = candidate
                break
        if meta is None:
            raise ConnectionError(f"no vLLM or SGLang metadata at {url!r} (is the engine running?)")
        params, source = neutral_params(meta), "engine HTTP metadata"
        if exporter_url:
            manifest, _ = await fetch_exporter_manifest(session, exporter_url, timeout_s=5.0)
            chosen = pick_engine((manifest or {}).get("engines") or [], base)
            if chosen and chosen.get("params"):
                params, source = dict(chosen["params"]), f"exporter {exporter_url}"
    return EngineFacts(url, meta.engine, meta.version, meta.model, params, source)


def _port(url: str | None) -> int | None:
    try:
        return urlsplit(url or "").port
    except ValueError:
        return None


def _flag_port(cmdline: list[str]) -> int | None:
    for i, token in enumerate(cmdline):
        value = (
            token.split("=", 1)[1]
            if token.startswith("--port=")
            else (cmdline[i + 1] if token == "--port" and i + 1 < len(cmdline) else None)
        )
        if value is not None and value.isdigit():
            return int(value)
    return None


def pick_engine(engines: list[dict[str, Any]], url: str) -> dict[str, Any] | None:
    """The exporter's engine serving `url` (same port in its URL or its --port flag), else the first."""
    port = _port(url)
    for engine in engines:
        if port is not None and port in (_port(engine.get("url")), _flag_port(engine.get("cmdline") or [])):
            return engine
    return engines[0] if engines else None


def facts_from_url(url: str, exporter_url: str | None = None) -> EngineFacts:
    """Ask a live engine (and optionally its exporter) for its effective parameters."""
    return asyncio.run(_from_url(url, exporter_url))


def facts_from_run(results_dir: str, run_id: str) -> EngineFacts:
    """The engine facts a stored run recorded (raises RunNotFound for an unknown id)."""
    manifest = load_run(results_dir, run_id).manifest
    engine = manifest.get("engine") or {}
    exporter_engines = (manifest.get("exporter") or {}).get("engines") or []
    params = engine.get("params") or (exporter_engines[0].get("params") if exporter_engines else {}) or {}
    return EngineFacts(
        run_id,
        engine.get("engine"),
        engine.get("version"),
        engine.get("model"),
        dict(params),
        f"run {run_id} manifest",
    )


def identity_differences(a: EngineFacts, b: EngineFacts) -> list[tuple[str, Any, Any]]:
    """Engine, version and model when they differ."""
    pairs = (("engine", a.engine, b.engine), ("version", a.version, b.version), ("model", a.model, b.model))
    return [(name, x, y) for name, x, y in pairs if x != y]
