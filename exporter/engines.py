"""Engine facts for /metrics and /manifest: discovered processes merged with --engine-url polling."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psutil

from exporter.discovery import (
    EngineProcess,
    ProcessContext,
    ProcInfo,
    find_engines,
    gpu_holders,
    listening_ports,
    pair_urls,
    process_context,
    read_processes,
    relevant_env,
)
from exporter.engine_http import EngineHttpFacts, poll_engine
from exporter.engine_memory import remember
from exporter.model_info import read_model_config
from infergauge import engines
from infergauge.engines.params import model_of
from infergauge.engines.resolve import resolve, server_args
from infergauge.redact import redact_argv, redact_mapping

INTERPRETER_RETRY_S = 30.0


@dataclass
class EngineReport:
    """One engine as the manifest shows it (every text already redacted)."""

    engine: str
    version: str | None
    model: str | None
    pid: int | None
    url: str | None
    up: bool  # answered HTTP
    ready: bool = False  # its readiness endpoint (/health) said 200
    stale: dict[str, float] = field(default_factory=dict)  # fact -> age (s) of a kept last value
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


def launched_interpreter(pid: int, where: ProcessContext) -> str | None:
    """The Python the engine was started with, as started: its argv[0] (found with the engine's own
    PATH and cwd), not /proc/<pid>/exe, which resolves a venv's `bin/python` symlink to the base
    interpreter and so loses the venv's packages; that executable when argv[0] is no Python."""
    try:
        proc = psutil.Process(pid)
        argv, exe = proc.cmdline(), proc.exe()
    except (psutil.Error, OSError):
        return None
    first = argv[0] if argv else ""
    if not os.path.basename(first).startswith("python"):
        return exe
    found = first if os.sep in first else shutil.which(first, path=(where.environ or {}).get("PATH"))
    if found and not os.path.isabs(found) and where.cwd:
        found = os.path.join(where.cwd, found)
    return found if found and os.access(found, os.X_OK) else exe


def version_from_interpreter(pid: int, engine: str, timeout_s: float = 10.0) -> str | None:
    """Ask the engine's own Python, in the engine's own environment and working directory (its
    PYTHONPATH, VIRTUAL_ENV, PATH from /proc/<pid>/environ), which version of its package it has.

    The environment goes to that one child process only: never into the exporter's, a log or output;
    the child's stderr is dropped. Unreadable (another user's process): the exporter's own is used.
    """
    where = process_context(pid)
    exe = launched_interpreter(pid, where)
    if exe is None:
        return None
    code = f"import importlib.metadata as m; print(m.version({engines.get(engine).package!r}))"
    try:
        done = subprocess.run(
            [exe, "-c", code],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
            env=where.environ,
            cwd=where.cwd,
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
        self.nvml_pids: set[int] | None = None  # NVML's GPU processes, when the GPU collector read them
        self.read_procs = read_procs
        self.read_env = read_env
        self.ask_interpreter = ask_interpreter
        self.poll = poll
        self.ports_of = ports_of
        self._lock = threading.Lock()  # guards _cached and _refreshing
        self._inspecting = threading.Lock()  # one inspection at a time (it owns _memory, _versions)
        self._refreshing = False
        self._done: threading.Event | None = None  # set when the refresh reports_within started ends
        self._cached: tuple[float, list[EngineReport]] | None = None
        self._versions: dict[tuple[int, str], tuple[str | None, float]] = {}  # answer, asked at
        self._memory: dict[str, dict[str, tuple[Any, float]]] = {}  # url -> last good facts

    def reports(self, *, fresh: bool = False) -> list[EngineReport]:
        """All engines: read now when `fresh` or never read; else the last reading, refreshed in the
        background once it is `cache_s` old (a scrape never waits for a slow engine endpoint)."""
        with self._lock:
            cached = self._cached
            if not fresh and cached is not None:
                if time.monotonic() - cached[0] >= self.cache_s and not self._refreshing:
                    self._refreshing = True
                    threading.Thread(target=self._refresh, name="engine-refresh", daemon=True).start()
                return cached[1]
        return self._refresh()

    def reports_within(self, budget_s: float) -> tuple[list[EngineReport], float]:
        """(reports, their age in s): a reading that ends within `budget_s`, else the last reading
        with its age (the refresh goes on in the background); the first reading is always awaited."""
        done = self.refresh_in_background()
        fresh = done.wait(budget_s)
        with self._lock:
            cached = self._cached
        if cached is None:  # nothing read yet: no facts to answer from but the first reading's
            done.wait()
            with self._lock:
                cached = self._cached
        if cached is None:  # the refresh itself failed
            return [], 0.0
        return cached[1], 0.0 if fresh else max(0.0, time.monotonic() - cached[0])

    def refresh_in_background(self) -> threading.Event:
        """The event of the refresh in flight, starting one when none is."""
        with self._lock:
            if self._done is not None and not self._done.is_set():
                return self._done
            done = self._done = threading.Event()
            self._refreshing = True

        def run() -> None:
            try:
                self._refresh()
            finally:
                done.set()

        threading.Thread(target=run, name="engine-refresh", daemon=True).start()
        return done

    def _refresh(self) -> list[EngineReport]:
        try:
            with self._inspecting:
                reports = self._inspect()
            with self._lock:
                self._cached = (time.monotonic(), reports)
            return reports
        finally:
            with self._lock:
                self._refreshing = False

    def _inspect(self) -> list[EngineReport]:
        processes = find_engines(self.read_procs()) if self.discover else []
        for proc in processes:
            proc.listening = self.ports_of(proc.pid)
        polled = [(url, self._poll(url)) for url in self.engine_urls]
        # engines keyed by process and port (discovery.pair_urls), never by port alone
        pairs = pair_urls(processes, [(url, facts.model) for url, (facts, _) in polled])
        reports = [self._report(found, *http) for (_, http), (_, found) in zip(polled, pairs, strict=False)]
        for _, found in pairs[len(polled) :]:  # processes no URL named, each polled at its own address
            if found is not None:
                reports.append(self._report(found, *self._poll(found.base_url)))
        return reports

    def _poll(self, url: str) -> tuple[EngineHttpFacts, dict[str, float]]:
        """Poll `url`; facts of endpoints that timed out come from the last poll, with their age."""
        facts = self.poll(url, self.http_timeout_s, self.api_key)
        return remember(facts, self._memory.setdefault(facts.url, {}), time.monotonic())

    def _report(
        self, proc: EngineProcess | None, http: EngineHttpFacts, stale: dict[str, float]
    ) -> EngineReport:
        name = proc.engine if proc else (http.engine or "unknown")
        spec = engines.ENGINES.get(name)
        speaker = engines.ENGINES.get(http.engine or "") or spec
        args: dict[str, Any] = dict(proc.args) if proc else {}
        if not proc and speaker is not None and http.server_info:
            args = {k: v for k, v in server_args(speaker, http.server_info).items() if v is not None}
        env = self.read_env(proc.pid) if proc else {}
        model_path = str(args.get("model") or args.get("model_path") or "")
        model_config = read_model_config(model_path, env) if model_path else {}
        report = EngineReport(
            engine=name,
            version=http.version or (self._interpreter_version(proc) if proc else None),
            model=(model_of(spec, args) if spec else None) or http.model,
            pid=proc.pid if proc else None,
            url=http.url,
            up=http.up,
            ready=http.ready,
            stale=stale,
            cmdline=redact_argv(proc.argv) if proc else [],
            args=redact_mapping(args),
            model_config=model_config,
            env=redact_mapping(env),
            gpu_pids=gpu_holders(proc, self.nvml_pids) if proc else [],
        )
        if spec is not None:
            resolved = resolve(
                spec,
                cmdline=proc.args if proc else None,  # None: flags not read (no process here)
                server_info=http.server_info,
                server_info_path=http.server_info_path,
                max_model_len=http.max_model_len,
                reported=http.reported,
                model_config=model_config,
                server_spec=speaker,
                gpu_memory_bytes=self.gpu_memory_bytes,
                gpu_name=self.gpu_name,
            )
            report.params, report.param_sources = resolved.params, resolved.param_sources
        return report

    def _interpreter_version(self, proc: EngineProcess) -> str | None:
        """Asked once per process; a failed answer (an engine still starting) is asked again after
        INTERPRETER_RETRY_S."""
        key, now = (proc.pid, proc.engine), time.monotonic()
        known = self._versions.get(key)
        if known is None or (known[0] is None and now - known[1] >= INTERPRETER_RETRY_S):
            known = self._versions[key] = (self.ask_interpreter(proc.pid, proc.engine), now)
        return known[0]
