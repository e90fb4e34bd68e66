"""Asking a running engine about itself over HTTP: up, version, served model, server args.

Every metadata endpoint a registered engine answers is asked once (`infergauge.engines.metadata_paths`),
and the engine is recognised from what the bodies *contain* (`detect_http`), not from which
endpoint answered: a vLLM in dev mode and the simulated vLLM answer `/server_info` too.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from infergauge.engines import EngineSpec, detect_http, metadata_paths
from infergauge.redact import redact_url


@dataclass
class EngineHttpFacts:
    """What the endpoints said; `up` is True when any of them answered 200."""

    url: str
    up: bool = False
    engine: str | None = None
    version: str | None = None
    model: str | None = None
    max_model_len: int | None = None
    server_args: dict[str, Any] = field(default_factory=dict)  # the server-info body's scalar fields
    server_info: dict[str, Any] | None = None  # the whole server-info body, for resolve()
    server_info_path: str = ""


class Unreachable(Exception):
    """Nothing answers at that address (refused, timed out, no route)."""


def get_json(url: str, timeout_s: float, headers: dict[str, str] | None = None) -> Any | None:
    """GET a JSON body; None on an HTTP error status or a body that is not JSON; Unreachable when
    no HTTP answer came at all (so a dead engine costs one timeout, not one per endpoint)."""
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:  # noqa: S310 - user-given URL
            return json.loads(response.read(2_000_000)) if response.status == 200 else None
    except urllib.error.HTTPError:
        return None
    except (urllib.error.URLError, OSError) as exc:
        raise Unreachable(str(exc)) from exc
    except ValueError:
        return None


def facts_from_bodies(url: str, bodies: dict[str, Any]) -> EngineHttpFacts:
    """Pure: the facts a set of metadata bodies ({path: JSON or None}) tell about one engine."""
    facts = EngineHttpFacts(url=url, up=any(body is not None for body in bodies.values()))
    models = bodies.get("/v1/models")
    if isinstance(models, dict) and models.get("data"):
        first = models["data"][0]
        facts.model = str(first.get("id"))
        if isinstance(first.get("max_model_len"), int):
            facts.max_model_len = first["max_model_len"]
    spec = detect_http(bodies)
    if spec is None:
        return facts
    facts.engine = spec.name
    _server_info(spec, bodies, facts)
    version = bodies.get(spec.version_path or "")
    if isinstance(version, dict) and version.get("version"):
        facts.version = str(version["version"])
    return facts


def _server_info(spec: EngineSpec, bodies: dict[str, Any], facts: EngineHttpFacts) -> None:
    for path in spec.server_info.paths:
        info = bodies.get(path)
        if isinstance(info, dict) and info:
            facts.server_info, facts.server_info_path = info, path
            facts.server_args = {
                k: v for k, v in info.items() if isinstance(v, str | int | float | bool) or v is None
            }
            key = spec.server_info.version_key
            if key and info.get(key):
                facts.version = str(info[key])
            return


def poll_engine(base_url: str, timeout_s: float = 1.0, api_key: str | None = None) -> EngineHttpFacts:
    """Ask `base_url` every metadata endpoint; the engine recognised from the answers' content."""
    base = base_url.rstrip("/")
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    bodies: dict[str, Any] = {}
    for path in metadata_paths():
        try:
            bodies[path] = get_json(f"{base}{path}", timeout_s, headers)
        except Unreachable:
            break  # nothing more will answer; what already answered still counts
    return facts_from_bodies(redact_url(base), bodies)
