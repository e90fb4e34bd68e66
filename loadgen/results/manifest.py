"""The run manifest: the facts that explain a run's numbers (client, tool, config, workload,
engine metadata and launch parameters, exporter's host/GPU manifest, cache state)."""

from __future__ import annotations

import os
import platform
import re
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from infergauge import engines
from infergauge.engines.resolve import Resolved, resolve
from infergauge.redact import redact
from loadgen import __version__
from loadgen.provenance import git_sha
from loadgen.records import EngineMetadata
from loadgen.targets.exporter_client import match_engine
from loadgen.transport import kernel_stamps
from loadgen.transport.evloop import loop_name

# a platform text platform() would not change: no empty part, nothing it cleans up
_PLAIN_PLATFORM = re.compile(r"[A-Za-z0-9._+]+(-[A-Za-z0-9._+]+)*")


def cpu_model() -> str | None:
    """The CPU's model name from /proc/cpuinfo (platform fallback)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def host_platform() -> str:
    """`platform.platform()`'s text without the `uname -p` process it starts for the processor field
    (~1 ms of CPU a record, and a fork of the whole client): on glibc Linux that field is dropped
    where it is "unknown" or the machine's name (Debian, Ubuntu, Fedora), so the text is
    system-release-machine-with-libc, as platform() joins it, when those parts need none of its
    clean-up (a space, "/", "unknown", ...); anywhere else, platform.platform(). Where `uname -p`
    names something else (Gentoo: the CPU's model) the text leaves it out; the model is the
    record's `cpu_model`."""
    system, _, release, _, machine = os.uname()
    try:
        name, _, version = (os.confstr("CS_GNU_LIBC_VERSION") or "").partition(" ")
    except (ValueError, OSError):
        name = version = ""
    text = f"{system}-{release}-{machine}-with-{name}{version}"
    if system != "Linux" or not version or not _PLAIN_PLATFORM.fullmatch(text) or "unknown" in text:
        return platform.platform()
    return text


def host_load() -> dict[str, Any] | None:
    """The client host's 1-minute load average when the record is written (None where unknown): a
    baseline keeps a run of an overloaded host out of its check (loadgen.baseline.noisy)."""
    try:
        load = os.getloadavg()[0]
    except OSError:
        return None
    cpus = os.cpu_count() or 1
    return {"loadavg_1m": round(load, 2), "loadavg_1m_per_cpu": round(load / cpus, 3)}


def client_info() -> dict[str, Any]:
    """Where the load generator ran."""
    return {
        "hostname": socket.gethostname(),
        "platform": host_platform(),
        "python": platform.python_version(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "event_loop": loop_name(),
        "arrival_stamps": kernel_stamps.arrival_stamps(),  # kernel | read | mixed (the raw client's reads)
        "native_reads": kernel_stamps.native_reads(),  # the raw client read in C (loadgen.transport._kread)
        "send_priority": kernel_stamps.send_priority(),  # realtime | short-slice | none (the send thread)
        "load": host_load(),
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


LAUNCH_COMMAND = "experiment launch command"


def _exporter_gpu(exporter: dict[str, Any] | None) -> tuple[int | None, str]:
    gpus = (exporter or {}).get("gpus") or []
    first = gpus[0] if gpus and isinstance(gpus[0], dict) else {}
    memory = first.get("memory_total_bytes")
    return (memory if isinstance(memory, int) else None), str(first.get("name") or "")


def resolved_params(
    meta: EngineMetadata,
    exporter_engine: dict[str, Any] | None,
    exporter: dict[str, Any] | None = None,
    launch_args: dict[str, Any] | None = None,
) -> Resolved | None:
    """The one resolution of the run's effective parameters: the engine's command line (the exporter's
    reading of it, else the command a plan launched) and model config, then what the engine said
    over HTTP (infergauge.engines.resolve)."""
    speaker = engines.ENGINES.get(meta.speaks or "")
    spec = engines.ENGINES.get(meta.engine) or speaker
    if spec is None:
        return None
    memory, gpu_name = _exporter_gpu(exporter)
    return resolve(
        spec,
        cmdline=(exporter_engine or {}).get("args") if exporter_engine else launch_args,
        server_info=meta.server_args if meta.server_info_path else None,
        server_info_path=meta.server_info_path,
        max_model_len=meta.max_model_len,
        reported=meta.reported or None,
        model_config=(exporter_engine or {}).get("model_config"),
        server_spec=speaker,
        origin="exporter ",
        cmdline_label=None if exporter_engine or not launch_args else LAUNCH_COMMAND,
        gpu_memory_bytes=memory,
        gpu_name=gpu_name,
    )


def engine_section(
    meta: EngineMetadata | None,
    base_url: str,
    exporter: dict[str, Any] | None = None,
    launch_args: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The manifest's `engine` block; `params` / `param_sources` from the one resolution, the
    exporter's engine that serves `base_url` (else `launch_args`) supplying the command line."""
    if meta is None:
        return {
            "engine": None,
            "version": None,
            "model": None,
            "max_model_len": None,
            "base_url": public_url(base_url),
            "server_args": {},
            "params": {},
            "param_sources": {},
        }
    watched = match_engine((exporter or {}).get("engines") or [], base_url)
    resolved = resolved_params(meta, watched, exporter, launch_args)
    return {
        "engine": meta.engine,
        "target_preset": meta.asked_engine,  # set when --target named another engine than answered
        "version": meta.version or (watched or {}).get("version"),
        "model": meta.model,
        "max_model_len": meta.max_model_len,
        "base_url": public_url(base_url),
        "models": meta.models,
        "sources": meta.sources,
        "server_args": redact(meta.server_args),
        "params": resolved.params if resolved else {},
        "param_sources": resolved.param_sources if resolved else {},
    }


def unknown_params(param_sources: Mapping[str, Any]) -> list[str]:
    """The neutral parameters a manifest's engine block could not know (UNKNOWN source), from its
    `param_sources` (Manifest.engine.param_sources)."""
    return sorted(k for k, v in param_sources.items() if str(v).startswith("unknown"))
