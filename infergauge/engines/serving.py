"""Which engine an exporter watched serves a URL: the one rule that attaching an exporter to a run
(loadgen.targets.exporter_client) and reading a run record's served engine (loadgen.results.
manifest_views) both use. An engine serves on its URL's port, its `--port` flag's, else its engine's
default port; it serves `base_url` when that port matches and the hosts do not clearly differ."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from infergauge.engines import ENGINES

_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1", "0.0.0.0", "::"})


def url_port(url: Any) -> int | None:
    """The port of a URL: its own, else its scheme's (80, 443) when it names a host; None otherwise."""
    try:
        parts = urlsplit(str(url or ""))
        return parts.port or ({"http": 80, "https": 443}.get(parts.scheme) if parts.hostname else None)
    except ValueError:
        return None


def explicit_port(url: Any) -> int | None:
    """The port a URL spells out (None when it has none or is no URL)."""
    try:
        return urlsplit(str(url or "")).port
    except ValueError:
        return None


def url_host(url: Any) -> str | None:
    """The host a URL names (None when it names none or is no URL)."""
    try:
        return urlsplit(str(url or "")).hostname
    except ValueError:
        return None


def same_host(engine_url: Any, base_url: Any) -> bool:
    """False only when both URLs name hosts and they clearly differ (loopback names are one host)."""
    mine, theirs = url_host(base_url), url_host(engine_url)
    if not mine or not theirs:
        return True
    return mine == theirs or (mine in _LOOPBACK and theirs in _LOOPBACK)


def engine_ports(engine: Mapping[str, Any]) -> set[int]:
    """Ports an exporter-reported engine serves on: its URL's, its `--port` flag's, else its default."""
    ports = {p for p in (url_port(engine.get("url")),) if p is not None}
    args = engine.get("args")
    flag = args.get("port") if isinstance(args, Mapping) else None
    if flag is not None and str(flag).isdigit():
        ports.add(int(str(flag)))
    spec = ENGINES.get(str(engine.get("engine")))
    if not ports and spec is not None:
        ports.add(spec.default_port)
    return ports


def serves(engine: Mapping[str, Any], base_url: Any) -> bool:
    """Whether the exporter-reported `engine` serves `base_url` (its port, and not another host)."""
    port = url_port(base_url)
    return port is not None and port in engine_ports(engine) and same_host(engine.get("url"), base_url)
