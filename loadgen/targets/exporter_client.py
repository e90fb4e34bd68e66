"""The one client of the exporter's `/manifest`: fetch it, and pick the engine it watches for a URL.

A run attaches an exporter only when it watches the run's target: one of its engines serves the
run's base URL (same port in its URL, its `--port` flag or its engine's default port, and not
another host), whether the user named the exporter (`--exporter-url`) or it is the default one.
Only that engine is recorded; otherwise the manifest records why none was attached (on a shared
host 127.0.0.1:9402 may be another user's exporter watching another engine). docs/engine-facts.md.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from infergauge.engines.serving import engine_ports, serves
from infergauge.redact import redact_url
from loadgen.config import NO_EXPORTER
from loadgen.transport.plainhttp import HttpSession, PlainSession, client_errors

EXPORTER_DEFAULT = "http://127.0.0.1:9402"


class ExporterUnreachable(Exception):
    """The exporter's /manifest could not be read; the message names the URL (credentials removed)."""


def manifest_url(url: str) -> str:
    """`<exporter>/manifest` for an exporter base URL (kept when it already ends so)."""
    base = url.rstrip("/")
    return base if base.endswith("/manifest") else f"{base}/manifest"


async def get_exporter_manifest(session: HttpSession, url: str, timeout_s: float) -> dict[str, Any]:
    """The exporter's /manifest as a JSON object (basic auth may ride in the URL as user:password@)."""
    target = manifest_url(url)
    shown = redact_url(target)
    try:
        async with session.get(target, timeout=timeout_s) as resp:
            if resp.status != 200:
                raise ExporterUnreachable(f"{shown}: HTTP {resp.status}")
            body = json.loads(await resp.read())
    except client_errors(TimeoutError, ValueError) as exc:
        raise ExporterUnreachable(f"{shown}: {type(exc).__name__}: {redact_url(str(exc))}") from None
    if not isinstance(body, dict):
        raise ExporterUnreachable(f"{shown}: the body is not a JSON object")
    return body


def read_exporter_manifest(url: str, timeout_s: float) -> dict[str, Any]:
    """Blocking form of `get_exporter_manifest` (for `loadgen preflight`)."""

    async def _read() -> dict[str, Any]:
        async with PlainSession() as session:
            return await get_exporter_manifest(session, url, timeout_s)

    return asyncio.run(_read())


async def fetch_exporter_manifest(
    session: HttpSession, url: str | None, timeout_s: float = 1.0, default: str | None = None
) -> tuple[dict[str, Any] | None, str]:
    """(the exporter's /manifest or None, where it came from or why not); `default` (else
    EXPORTER_DEFAULT, read at call time) when no URL."""
    if url == NO_EXPORTER:
        return None, f"not attached: --exporter-url {NO_EXPORTER}"
    default = default or EXPORTER_DEFAULT
    try:
        manifest = await get_exporter_manifest(session, url or default, timeout_s if not url else 5)
    except ExporterUnreachable as exc:
        return None, str(exc)
    return manifest, redact_url(manifest_url(url or default))


def match_engine(exporter_engines: list[dict[str, Any]], base_url: str) -> dict[str, Any] | None:
    """The exporter engine that serves `base_url` (same port, and not another host), None when none does."""
    return next((e for e in exporter_engines if serves(e, base_url)), None)


async def attach_exporter(
    session: HttpSession, exporter_url: str | None, base_url: str, default: str | None = None
) -> tuple[dict[str, Any] | None, str]:
    """(manifest to record, source) when the exporter (named, else the one at `default`) watches
    `base_url`: its `engines` cut to that one engine, so no other engine's facts reach the run;
    (None, why not) otherwise, and none at all for `--exporter-url none`."""
    manifest, source = await fetch_exporter_manifest(session, exporter_url, default=default)
    if manifest is None:
        return None, source
    watched = manifest.get("engines") or []
    engine = match_engine(watched, base_url)
    if engine is not None:
        return {**manifest, "engines": [engine]}, source
    ports = sorted({p for e in watched for p in engine_ports(e)})
    named = "" if exporter_url else "; name one that does with --exporter-url"
    return None, (
        f"not attached: the exporter at {source} watches no engine at {redact_url(base_url)} "
        f"(its engines serve ports {ports or 'none'}){named}"
    )


def attached_line(manifest: dict[str, Any] | None, source: str) -> str:
    """The console line saying which exporter was attached (and the engine it watches), or why none."""
    if manifest is None:
        return (
            f"warning: no exporter attached ({source}): engine launch flags, GPU and host facts are missing"
        )
    (engine,) = manifest.get("engines") or [{}]
    version = f" {engine.get('version')}" if engine.get("version") else ""
    where = engine.get("url") or "a local process"
    return f"exporter: {source} (watches {engine.get('engine')}{version} at {where})"
