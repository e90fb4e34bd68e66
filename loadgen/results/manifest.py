"""The run manifest: the facts that explain a run's numbers (client, tool, config, workload,
engine metadata and launch parameters, exporter's host/GPU manifest, cache state)."""

from __future__ import annotations

import json
import os
import platform
import re
import socket
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import aiohttp

from loadgen import __version__
from loadgen.provenance import git_sha
from loadgen.run.evloop import loop_name
from loadgen.targets.base import EngineMetadata

SECRET_HINTS = ("key", "token", "secret", "password", "authorization", "credentials")
VLLM_CONFIG_FIELDS = {  # vLLM /server_info `vllm_config` string field -> vLLM argument name
    "tensor_parallel_size": "tensor_parallel_size",
    "max_seq_len": "max_model_len",
    "dtype": "dtype",
    "enable_prefix_caching": "enable_prefix_caching",
    "enable_chunked_prefill": "enable_chunked_prefill",
    "kv_cache_dtype": "kv_cache_dtype",
    "quantization": "quantization",
    "seed": "seed",
}
EXPORTER_DEFAULT = "http://127.0.0.1:9402"


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
        "event_loop": loop_name(),
    }


def tool_info() -> dict[str, Any]:
    """Name, version and commit of this tool (loadgen.provenance: own checkout, else build stamp)."""
    sha, source = git_sha()
    return {"name": "infergauge", "version": __version__, "git_sha": sha, "git_sha_source": source}


def public_url(url: str) -> str:
    """`url` without any `user:password@` part (for labels, manifests and logs)."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    netloc = host if parts.port is None else f"{host}:{parts.port}"
    return urlunsplit(parts._replace(netloc=netloc))


def _is_secret(key: str) -> bool:
    name = key.lower()
    return any(name == h or name.endswith(("_" + h, "-" + h)) for h in SECRET_HINTS) or name == "apikey"


def redact(obj: Any) -> Any:
    """Replace values of secret-looking keys (`api_key`, `hf_token`, passwords) at any depth."""
    if isinstance(obj, dict):
        return {
            k: "<redacted>" if _is_secret(str(k)) and v not in (None, "") else redact(v)
            for k, v in obj.items()
        }
    if isinstance(obj, list):
        return [redact(v) for v in obj]
    return obj


def _scalar(text: str) -> Any:
    """`True`/`None`/`2048`/`torch.bfloat16` from vLLM's config repr -> Python values."""
    table = {"True": True, "False": False, "None": None}
    if text in table:
        return table[text]
    try:
        return int(text)
    except ValueError:
        return text.removeprefix("torch.").strip("'")


def parse_vllm_config(text: str) -> dict[str, Any]:
    """Top-level `key=value` fields of vLLM's `vllm_config` string that map to launch arguments."""
    out: dict[str, Any] = {}
    for match in re.finditer(r"(?:^|, )(\w+)=([^,]*)", text):
        key, value = match.group(1), match.group(2).strip()
        if key in VLLM_CONFIG_FIELDS and VLLM_CONFIG_FIELDS[key] not in out:
            out[VLLM_CONFIG_FIELDS[key]] = _scalar(value)
    return out


def engine_args(meta: EngineMetadata) -> tuple[str, dict[str, Any]]:
    """(engine spelling, flat launch arguments) found in the engine's server info."""
    engine = str(meta.server_args.get("personality", meta.engine))
    args = meta.server_args
    if isinstance(args.get("server_args"), dict):  # the simulator's vLLM personality nests them
        args = args["server_args"]
    elif isinstance(args.get("vllm_config"), str):
        args = parse_vllm_config(args["vllm_config"])
    flat = {k: v for k, v in args.items() if isinstance(v, int | float | str | bool) or v is None}
    return engine, flat


def neutral_params(meta: EngineMetadata) -> dict[str, Any]:
    """Engine-neutral parameters (exporter/engine_params.py) the server reported; unreported ones left out."""
    engine, args = engine_args(meta)
    if engine not in ("sglang", "vllm") or not args:
        return {}
    try:
        from exporter.engine_params import neutral_sources, to_neutral  # the exporter part owns this table

        sources = neutral_sources(engine, args)
        return {k: v for k, v in to_neutral(engine, args).items() if sources.get(k) == "flag"}
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
            "base_url": public_url(base_url),
            "server_args": {},
            "params": {},
        }
    return {
        "engine": meta.engine,
        "version": meta.version,
        "model": meta.model,
        "max_model_len": meta.max_model_len,
        "base_url": public_url(base_url),
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
