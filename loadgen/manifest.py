"""The run manifest: the facts that explain a run's numbers (client, tool, config, workload,
engine metadata and launch parameters, exporter's host/GPU manifest, cache state)."""

from __future__ import annotations

import json
import os
import platform
import socket
import subprocess
from pathlib import Path
from typing import Any

import aiohttp

from loadgen import __version__
from loadgen.targets.base import EngineMetadata

SECRET_HINTS = ("api_key", "apikey", "token", "secret", "password", "authorization")
EXPORTER_DEFAULT = "http://127.0.0.1:9402"


def git_sha() -> str | None:
    """The source tree's commit (None outside a git checkout)."""
    root = Path(__file__).resolve().parents[1]
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=5
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def cpu_model() -> str | None:
    """The CPU's model name from /proc/cpuinfo (platform fallback)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def client_info() -> dict[str, Any]:
    """Where the load generator ran."""
    return {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
    }


def tool_info() -> dict[str, Any]:
    """Name, version and commit of this tool."""
    return {"name": "infergauge", "version": __version__, "git_sha": git_sha()}


def redact(obj: Any) -> Any:
    """Replace values of secret-looking keys (api keys, tokens, passwords) at any depth."""
    if isinstance(obj, dict):
        return {
            k: "<redacted>"
            if any(h in str(k).lower() for h in SECRET_HINTS) and v not in (None, "")
            else redact(v)
            for k, v in obj.items()
        }
    if isinstance(obj, list):
        return [redact(v) for v in obj]
    return obj


def neutral_params(meta: EngineMetadata) -> dict[str, Any]:
    """Engine-neutral launch parameters (exporter/engine_params.py) from the server args, best effort."""
    engine = str(meta.server_args.get("personality", meta.engine))
    args = {k: v for k, v in meta.server_args.items() if isinstance(v, int | float | str | bool) or v is None}
    if engine not in ("sglang", "simengine", "vllm") or not args or "vllm_config" in args:
        return {}
    try:
        from exporter.engine_params import to_neutral  # the exporter part owns this vocabulary

        return dict(to_neutral(engine, args))
    except Exception:  # noqa: BLE001 - another part's parser must never break a run record
        return {}


def engine_section(meta: EngineMetadata | None, base_url: str) -> dict[str, Any]:
    """The manifest's `engine` block."""
    if meta is None:
        return {
            "engine": None,
            "version": None,
            "model": None,
            "max_model_len": None,
            "base_url": base_url,
            "server_args": {},
            "params": {},
        }
    return {
        "engine": meta.engine,
        "version": meta.version,
        "model": meta.model,
        "max_model_len": meta.max_model_len,
        "base_url": base_url,
        "models": meta.models,
        "sources": meta.sources,
        "server_args": redact(meta.server_args),
        "params": neutral_params(meta),
    }


async def fetch_exporter_manifest(
    session: aiohttp.ClientSession, url: str | None, timeout_s: float = 1.0
) -> tuple[dict[str, Any] | None, str]:
    """The exporter's /manifest (given URL, else the default port with a short timeout)."""
    base = (url or EXPORTER_DEFAULT).rstrip("/")
    target = base if base.endswith("/manifest") else f"{base}/manifest"
    try:
        async with session.get(
            target, timeout=aiohttp.ClientTimeout(total=timeout_s if not url else 5)
        ) as resp:
            if resp.status != 200:
                return None, f"{target}: HTTP {resp.status}"
            return json.loads(await resp.read()), target
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        return None, f"{target}: {type(exc).__name__}"
