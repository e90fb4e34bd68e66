"""The one client of the exporter's `/manifest`: fetch it, and pick the engine it watches for a URL.

A run attaches an exporter only when it watches the run's target: one of its engines serves the
run's base URL (same port in its URL, its `--port` flag or its engine's default port), or the user
named the exporter with `--exporter-url`. Otherwise the manifest records why none was attached
(on a shared host 127.0.0.1:9402 may be another user's exporter watching another engine).
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from infergauge import engines
from infergauge.redact import redact_url

EXPORTER_DEFAULT = "http://127.0.0.1:9402"


async def fetch_exporter_manifest(
    session: aiohttp.ClientSession, url: str | None, timeout_s: float = 1.0, default: str = EXPORTER_DEFAULT
) -> tuple[dict[str, Any] | None, str]:
    """(the exporter's /manifest or None, where it came from or why not); `default` when no URL."""
    base = (url or default).rstrip("/")
    target = base if base.endswith("/manifest") else f"{base}/manifest"
    shown = redact_url(target)
    try:
        async with session.get(
            target, timeout=aiohttp.ClientTimeout(total=timeout_s if not url else 5)
        ) as resp:
            if resp.status != 200:
                return None, f"{shown}: HTTP {resp.status}"
            return json.loads(await resp.read()), shown
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        return None, f"{shown}: {type(exc).__name__}"


def _port(url: str | None) -> int | None:
    try:
        parts = urlsplit(url or "")
        return parts.port or ({"http": 80, "https": 443}.get(parts.scheme) if parts.hostname else None)
    except ValueError:
        return None


def engine_ports(engine: dict[str, Any]) -> set[int]:
    """Ports an exporter-reported engine serves on: its URL's, its `--port` flag's, else its default."""
    ports = {p for p in (_port(engine.get("url")),) if p is not None}
    flag = (engine.get("args") or {}).get("port")
    if flag is not None and str(flag).isdigit():
        ports.add(int(str(flag)))
    spec = engines.ENGINES.get(str(engine.get("engine")))
    if not ports and spec is not None:
        ports.add(spec.default_port)
    return ports


def match_engine(exporter_engines: list[dict[str, Any]], base_url: str) -> dict[str, Any] | None:
    """The exporter engine that serves `base_url` (by port), None when none does."""
    port = _port(base_url)
    return next((e for e in exporter_engines if port is not None and port in engine_ports(e)), None)


async def attach_exporter(
    session: aiohttp.ClientSession, exporter_url: str | None, base_url: str, default: str = EXPORTER_DEFAULT
) -> tuple[dict[str, Any] | None, str]:
    """(manifest to record, source) when the exporter watches `base_url` or was named by the user;
    (None, why not) otherwise; the exporter at `default` is tried when none is named."""
    manifest, source = await fetch_exporter_manifest(session, exporter_url, default=default)
    if manifest is None or exporter_url:
        return manifest, source
    watched = manifest.get("engines") or []
    if match_engine(watched, base_url) is not None:
        return manifest, source
    ports = sorted({p for e in watched for p in engine_ports(e)})
    return None, (
        f"not attached: the exporter at {source} watches no engine at {redact_url(base_url)} "
        f"(its engines serve ports {ports or 'none'}); name it with --exporter-url to attach it anyway"
    )
