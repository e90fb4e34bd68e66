"""Engine facts for /metrics and /manifest: discovered processes merged with --engine-url polling."""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import psutil

from exporter.discovery import (
    EngineProcess,
    ProcInfo,
    find_engines,
    listening_ports,
    read_processes,
    relevant_env,
)
from exporter.engine_http import EngineHttpFacts, poll_engine
from exporter.engine_params import neutral_sources, parse_flags, to_neutral
from exporter.model_info import read_model_config
from exporter.redact import redact_argv, redact_mapping

PACKAGES = {"vllm": "vllm", "sglang": "sglang", "simengine": "infergauge"}


@dataclass
class EngineReport:
    """One engine as the manifest shows it (every text already redacted)."""

    engine: str
    version: str | None
    model: str | None
    pid: int | None
    url: str | None
    up: bool
    cmdline: list[str] = field(default_factory=list)
    args: dict[str, Any] = field(default_factory=dict)  # every parsed flag, engine's own names
    params: dict[str, Any] = field(default_factory=dict)
    param_sources: dict[str, str] = field(default_factory=dict)
    model_config: dict[str, Any] = field(default_factory=dict)
    env: dict[str, Any] = field(default_factory=dict)
    gpu_pids: list[int] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form for /manifest."""
        return dict(self.__dict__)


def version_from_interpreter(pid: int, engine: str, timeout_s: float = 10.0) -> str | None:
    """Ask the engine's own Python which version of its package it has installed."""
    try:
        exe = psutil.Process(pid).exe()
    except (psutil.Error, OSError):
        return None
    code = f"import importlib.metadata as m; print(m.version({PACKAGES[engine]!r}))"
    try:
        done = subprocess.run(
            [exe, "-c", code], capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


class EngineInspector:
    """Finds engines (processes on this host, and the --engine-url list) and describes them."""

    def __init__(
        self,
        engine_urls: list[str] | None = None,
        *,
        discover: bool = True,
        api_key: str | None = None,
        http_timeout_s: float = 1.0,
        cache_s: float = 5.0,
        gpu_memory_bytes: int | None = None,
        gpu_name: str = "",
        read_procs: Callable[[], list[ProcInfo]] = read_processes,
        read_env: Callable[[int], dict[str, str]] = relevant_env,
        ask_interpreter: Callable[[int, str], str | None] = version_from_interpreter,
        poll: Callable[[str, float, str | None], EngineHttpFacts] = poll_engine,
        ports_of: Callable[[int], list[int]] = listening_ports,
    ) -> None:
        self.engine_urls = list(engine_urls or [])
        self.discover = discover
        self.api_key = api_key
        self.http_timeout_s = http_timeout_s
        self.cache_s = cache_s
        self.gpu_memory_bytes = gpu_memory_bytes
        self.gpu_name = gpu_name
        self.read_procs = read_procs
        self.read_env = read_env
        self.ask_interpreter = ask_interpreter
        self.poll = poll
        self.ports_of = ports_of
        self._lock = threading.Lock()
        self._cached: tuple[float, list[EngineReport]] | None = None
        self._versions: dict[tuple[int, str], str | None] = {}

    def reports(self, *, fresh: bool = False) -> list[EngineReport]:
        """All engines, re-read at most every `cache_s` seconds unless `fresh`."""
        with self._lock:
            if not fresh and self._cached and time.monotonic() - self._cached[0] < self.cache_s:
                return self._cached[1]
            reports = self._inspect()
            self._cached = (time.monotonic(), reports)
            return reports

    def _inspect(self) -> list[EngineReport]:
        processes = find_engines(self.read_procs()) if self.discover else []
        for proc in processes:
            proc.listening = self.ports_of(proc.pid)
        urls = list(self.engine_urls)
        by_port: dict[int, EngineProcess] = {proc.port: proc for proc in processes}
        reports: list[EngineReport] = []
        for url in urls:
            matched = by_port.pop(urlsplit(url).port or -1, None)
            reports.append(self._report(matched, self.poll(url, self.http_timeout_s, self.api_key)))
        for found in by_port.values():
            reports.append(self._report(found, self.poll(found.base_url, self.http_timeout_s, self.api_key)))
        return reports

    def _report(self, proc: EngineProcess | None, http: EngineHttpFacts) -> EngineReport:
        engine = proc.engine if proc else (http.engine or "unknown")
        args: dict[str, Any] = dict(proc.args) if proc else {}
        if not proc and engine == "sglang" and http.server_args:
            args = {k: v for k, v in http.server_args.items() if v is not None}
        env = self.read_env(proc.pid) if proc else {}
        version = http.version or (self._interpreter_version(proc) if proc else None)
        model = str(args.get("served_model_name") or args.get("model") or http.model or "") or None
        if http.max_model_len and "max_model_len" not in args and engine != "sglang":
            args["max_model_len"] = http.max_model_len
        params = self._neutral(engine, args)
        return EngineReport(
            engine=engine,
            version=version,
            model=model,
            pid=proc.pid if proc else None,
            url=http.url,
            up=http.up,
            cmdline=redact_argv(proc.argv) if proc else [],
            args=redact_mapping(args),
            params=params,
            param_sources=neutral_sources(engine, args) if engine in PACKAGES else {},
            model_config=read_model_config(str(args.get("model") or args.get("model_path") or ""), env)
            if args.get("model") or args.get("model_path")
            else {},
            env=redact_mapping(env),
            gpu_pids=list(proc.children) if proc else [],
        )

    def _neutral(self, engine: str, args: dict[str, Any]) -> dict[str, Any]:
        if engine not in PACKAGES:
            return {}
        return to_neutral(engine, args, gpu_memory_bytes=self.gpu_memory_bytes, gpu_name=self.gpu_name)

    def _interpreter_version(self, proc: EngineProcess) -> str | None:
        key = (proc.pid, proc.engine)
        if key not in self._versions:
            self._versions[key] = self.ask_interpreter(proc.pid, proc.engine)
        return self._versions[key]


def args_from_flags(engine: str, flags: list[str]) -> dict[str, Any]:
    """Parse a bare flag list (no program name) in `engine`'s spelling."""
    return dict(parse_flags(engine, flags))
