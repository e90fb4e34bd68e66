"""Finding engine processes on the host and the flags they were launched with.

Real captures (tests/fixtures/golden/*/ps.txt) show the process holding GPU memory is a child
retitled `VLLM::EngineCore` or `sglang::scheduler`: its command line is only that title, so the
launch flags are read from its parent, the API-server process. Reading (/proc via psutil) is kept
apart from the pure functions over `ProcInfo` lists, which the tests drive with the golden ps.txt.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import psutil

from infergauge import engines
from infergauge.engines.base import Value
from infergauge.engines.params import model_of, parse_cmdline


@dataclass(frozen=True)
class ProcInfo:
    """One process as discovery needs it."""

    pid: int
    ppid: int
    cmdline: tuple[str, ...]


@dataclass
class EngineProcess:
    """An engine's API-server process, its parsed flags and its (GPU-holding) children."""

    engine: str
    pid: int
    argv: list[str]
    args: dict[str, Value]
    children: list[int] = field(default_factory=list)  # every descendant (JIT compilers included)
    titled: list[int] = field(default_factory=list)  # descendants titled as its GPU workers
    listening: list[int] = field(default_factory=list)  # TCP ports it listens on, when known

    @property
    def port(self) -> int:
        """The HTTP port: --port (else the engine's default), unless the process listens elsewhere
        (`--port 0`, a port from a config file): then the first port it listens on."""
        default = engines.get(self.engine).default_port
        try:
            flagged = int(str(self.args.get("port", default)))
        except ValueError:
            flagged = default
        if self.listening and flagged not in self.listening:
            return self.listening[0]
        return flagged

    @property
    def base_url(self) -> str:
        """Where this engine answers HTTP on this host."""
        host = str(self.args.get("host", "127.0.0.1"))
        if host in ("0.0.0.0", "::", ""):
            host = "127.0.0.1"
        return f"http://{host}:{self.port}"


def title_engine(cmdline: Iterable[str]) -> str | None:
    """The engine of a retitled child (`VLLM::EngineCore`, `sglang::scheduler`), else None."""
    parts = list(cmdline)
    spec = engines.by_title(parts[0]) if parts else None
    return spec.name if spec else None


def find_engines(procs: list[ProcInfo]) -> list[EngineProcess]:
    """Engine API servers among `procs` (a forked child with the same command line is not another)."""
    by_pid = {p.pid: p for p in procs}
    found: dict[int, EngineProcess] = {}
    for proc in sorted(procs, key=lambda p: p.pid):
        spec, args = parse_cmdline(proc.cmdline)
        if spec is None:
            continue
        parent = by_pid.get(proc.ppid)
        if parent is not None and parent.cmdline == proc.cmdline:
            continue
        found[proc.pid] = EngineProcess(spec.name, proc.pid, list(proc.cmdline), args)
    for proc in procs:
        owner = engine_ancestor(proc.pid, by_pid, found)
        if owner is not None and owner.pid != proc.pid:
            owner.children.append(proc.pid)
            if proc.cmdline and proc.cmdline[0].strip() in engines.get(owner.engine).child_titles:
                owner.titled.append(proc.pid)
    return list(found.values())


def engine_key(proc: EngineProcess) -> tuple[int, int]:
    """An engine's identity on a host: its process and its port, never the port alone (engines in
    two network namespaces, or two hosts' facts, may both listen on :8000)."""
    return (proc.pid, proc.port)


def served_model(proc: EngineProcess) -> str | None:
    """The model the process was launched to serve (its model flags), None when it names none."""
    return model_of(engines.get(proc.engine), proc.args)


def pair_urls(
    processes: Sequence[EngineProcess], urls: Sequence[tuple[str, str | None]]
) -> list[tuple[str | None, EngineProcess | None]]:
    """Each polled engine URL, given with the model it answered (None: unknown), paired with the
    discovered process it is, then every process no URL named, alone, in (pid, port) order.

    A URL is the process on its port, unless the two serve different models. When several processes
    listen on that port (other network namespaces), it is the one serving its model, or none when
    that is not exactly one: no engine is dropped or merged into another because of a shared port.
    A process pairs with one URL at most."""
    left = sorted(processes, key=engine_key)
    out: list[tuple[str | None, EngineProcess | None]] = []
    for url, model in urls:
        port = urlsplit(url).port
        same_port = [p for p in left if p.port == port]
        if len(same_port) > 1:
            same_port = [p for p in same_port if model is not None and served_model(p) == model]
        match = same_port[0] if len(same_port) == 1 else None
        if match is not None and None not in (model, served_model(match)) and served_model(match) != model:
            match = None  # on the same port, but another engine (another namespace's)
        if match is not None:
            left.remove(match)
        out.append((url, match))
    return out + [(None, p) for p in left]


def gpu_holders(engine: EngineProcess, nvml_pids: set[int] | None) -> list[int]:
    """The engine's processes that hold GPU memory: its process tree intersected with NVML's GPU
    process list; without that list, its children titled as the engine's GPU workers.

    SGLang's JIT warm-up runs compiler subprocesses under the scheduler: they are in the tree but
    not in NVML's list, so they are not GPU processes of the engine.
    """
    if nvml_pids is None:
        return sorted(engine.titled)
    return sorted(pid for pid in {engine.pid, *engine.children} if pid in nvml_pids)


def nvml_process_ids(gpus: list[dict[str, Any]]) -> set[int] | None:
    """Pids in the manifest GPUs' NVML process lists; None when no GPU's list was read."""
    lists = [gpu["processes"] for gpu in gpus if isinstance(gpu.get("processes"), list)]
    return {int(p["pid"]) for listed in lists for p in listed} if lists else None


def engine_ancestor(
    pid: int, by_pid: dict[int, ProcInfo], servers: dict[int, EngineProcess]
) -> EngineProcess | None:
    """The engine API server that `pid` is, or descends from (walks up at most 16 parents)."""
    current: int | None = pid
    for _ in range(16):
        if current is None:
            return None
        if current in servers:
            return servers[current]
        proc = by_pid.get(current)
        current = proc.ppid if proc is not None and proc.ppid != current else None
    return None


def parse_ps(text: str) -> list[ProcInfo]:
    """Parse `ps -eo pid,ppid,user,etimes,rss,comm,args` output (the golden ps.txt) into ProcInfo."""
    procs: list[ProcInfo] = []
    for line in text.splitlines()[1:]:
        parts = line.split()
        if len(parts) < 7 or not parts[0].isdigit():
            continue
        procs.append(ProcInfo(int(parts[0]), int(parts[1]), tuple(parts[6:])))
    return procs


def read_processes() -> list[ProcInfo]:
    """Every visible process on this host (pid, ppid, command line)."""
    procs: list[ProcInfo] = []
    for proc in psutil.process_iter(["pid", "ppid", "cmdline"]):
        info = proc.info
        cmdline = info.get("cmdline") or []
        if len(cmdline) == 1 and " " in cmdline[0] and engines.detect_cmdline(cmdline[0].split())[0]:
            cmdline = cmdline[0].split()  # a process that rewrote argv as one string
        procs.append(ProcInfo(int(info["pid"]), int(info.get("ppid") or 0), tuple(cmdline)))
    return procs


def relevant_env(pid: int) -> dict[str, str]:
    """The engine's CUDA/NCCL/VLLM/SGLANG/HF env vars (unredacted: the caller redacts)."""
    try:
        environ = psutil.Process(pid).environ()
    except (psutil.Error, OSError):
        return {}
    prefixes = engines.env_prefixes()
    return {k: v for k, v in sorted(environ.items()) if k.startswith(prefixes)}


def listening_ports(pid: int) -> list[int]:
    """TCP ports the process listens on (needs permission to see its sockets; [] otherwise)."""
    try:
        conns = psutil.Process(pid).net_connections(kind="tcp")
    except (psutil.Error, OSError):
        return []
    return sorted({c.laddr.port for c in conns if c.status == psutil.CONN_LISTEN and c.laddr})


@dataclass(frozen=True)
class ProcessContext:
    """A process's whole environment and working directory (None where it cannot be read)."""

    environ: dict[str, str] | None = None
    cwd: str | None = None


def process_context(pid: int) -> ProcessContext:
    """The environment (/proc/<pid>/environ) and cwd a process runs with; secrets included, so it
    is only ever handed to a child process, never shown."""
    try:
        proc = psutil.Process(pid)
        environ = dict(proc.environ()) or None
    except (psutil.Error, OSError):
        return ProcessContext()
    try:
        cwd: str | None = proc.cwd()
    except (psutil.Error, OSError):
        cwd = None
    return ProcessContext(environ, cwd)
