"""Asking a running engine about itself over HTTP: up, version, served model, server args.

vLLM: `/version`, `/v1/models` (max_model_len), `/server_info` (dev mode only). SGLang 0.5.x:
`/get_server_info` (all server args + version; `/version` answers 404), `/get_model_info`.
The simulated engine answers like the personality it plays.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from exporter.redact import redact_url


@dataclass
class EngineHttpFacts:
    """What the endpoints said; `up` is True when any of them answered 200."""

    url: str
    up: bool = False
    engine: str | None = None
    version: str | None = None
    model: str | None = None
    max_model_len: int | None = None
    server_args: dict[str, Any] = field(default_factory=dict)


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


def _engine_of_server_info(info: dict[str, Any]) -> str:
    if "simengine" in json.dumps(info.get("engine", "")).lower() or info.get("simulated"):
        return "simengine"
    if "mem_fraction_static" in info or "tp_size" in info:
        return "sglang"
    return "vllm"


def poll_engine(base_url: str, timeout_s: float = 1.0, api_key: str | None = None) -> EngineHttpFacts:
    """Ask `base_url` for version, models and server args; `engine` guessed from what answers."""
    base = base_url.rstrip("/")
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    facts = EngineHttpFacts(url=redact_url(base))
    try:
        _ask(base, timeout_s, headers, facts)
    except Unreachable:
        facts.up = False
    return facts


def _ask(base: str, timeout_s: float, headers: dict[str, str], facts: EngineHttpFacts) -> None:
    models = get_json(f"{base}/v1/models", timeout_s, headers)
    if isinstance(models, dict) and models.get("data"):
        first = models["data"][0]
        facts.up = True
        facts.model = str(first.get("id"))
        if isinstance(first.get("max_model_len"), int):
            facts.max_model_len = first["max_model_len"]
    version = get_json(f"{base}/version", timeout_s, headers)
    if isinstance(version, dict) and "version" in version:
        facts.up, facts.version, facts.engine = True, str(version["version"]), "vllm"
    for path in ("/get_server_info", "/server_info"):
        info = get_json(f"{base}{path}", timeout_s, headers)
        if isinstance(info, dict) and info:
            facts.up = True
            facts.engine = (
                _engine_of_server_info(info)
                if facts.engine is None or path == "/get_server_info"
                else facts.engine
            )
            facts.version = facts.version or (str(info["version"]) if "version" in info else None)
            facts.server_args = {
                k: v for k, v in info.items() if isinstance(v, (str, int, float, bool)) or v is None
            }
            break
