"""The yardstick from `../shared/refbench` (not copied here): a ground-truth streaming server and a lean
Go client, found or built at bench time, and started as pinned processes.

Where the binaries come from, first match wins:
  1. REFBENCH_BIN: a folder holding built `refserver` and `refclient` (e.g. carried to a host with no Go);
  2. a cache folder (REFBENCH_BUILD, default ~/.cache/infergauge/refbench) where an earlier bench built them;
  3. `go build` of REFBENCH (the refbench source folder; default `../shared/refbench` beside the repo, or
     two levels up for a worktree) into that cache, when `go` is on PATH.
Otherwise `locate` says why, and the benches print that line and skip the Go side.

`RefServer` is one server process (`-procs N` on N pinned cores); its log, written at exit, is the
truth: per request (`hdr_id` = X-Request-Id) its arrival, first and last token stamps on CLOCK_MONOTONIC
(the clock of `time.perf_counter_ns()`), its own TTFT and, with `log_tokens`, each token's send time.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BINARIES = ("refserver", "refclient")
REPO = Path(__file__).resolve().parents[1]
SOURCES = (REPO.parent / "shared" / "refbench", REPO.parent.parent / "shared" / "refbench")


@dataclass(frozen=True)
class Tools:
    """Paths of the two binaries."""

    server: Path
    client: Path


def _found(folder: Path) -> Tools | None:
    paths = [folder / name for name in BINARIES]
    if all(p.is_file() and os.access(p, os.X_OK) for p in paths):
        return Tools(*paths)
    return None


def _source(env: Mapping[str, str]) -> Path | None:
    given = env.get("REFBENCH")
    candidates = [Path(given)] if given else list(SOURCES)
    return next((c for c in candidates if (c / "server" / "main.go").is_file()), None)


def locate(env: Mapping[str, str] | None = None, go: str | None = None) -> Tools | str:
    """The binaries (see module docstring), or a one-line reason why there are none."""
    env = os.environ if env is None else env
    if env.get("REFBENCH_BIN"):
        got = _found(Path(env["REFBENCH_BIN"]))
        return got or f"REFBENCH_BIN={env['REFBENCH_BIN']!r} holds no executable refserver and refclient"
    cache = Path(env.get("REFBENCH_BUILD") or Path.home() / ".cache" / "infergauge" / "refbench")
    src = _source(env)
    built = _found(cache)
    if built and (src is None or not _stale(built, src)):
        return built
    if src is None:
        return "no refbench source (set REFBENCH to ../shared/refbench, or REFBENCH_BIN to built binaries)"
    go = go if go is not None else shutil.which("go")
    if not go:
        return f"Go is not installed (no `go` on PATH) and no built binaries in {cache} or REFBENCH_BIN"
    return build(go, src, cache)


def _stale(tools: Tools, src: Path) -> bool:
    newest = max(p.stat().st_mtime for p in src.glob("*/*.go"))
    return min(tools.server.stat().st_mtime, tools.client.stat().st_mtime) < newest


def build(go: str, src: Path, out: Path) -> Tools | str:
    """`go build` both binaries (static, CGO off) into `out`; a reason string when a build fails."""
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-mod=mod"}
    env.setdefault("GOCACHE", str(out / "gocache"))
    for name, folder in zip(BINARIES, ("server", "refclient"), strict=True):
        done = subprocess.run(
            [go, "build", "-o", str(out / name), "."],
            cwd=src / folder,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            return f"go build of {src / folder} failed: {done.stderr.strip()[-200:]}"
    return _found(out) or f"go build left no binaries in {out}"


def free_port() -> int:
    """A free loopback port (the server takes an address, not port 0)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def pin(cores: Iterable[int]) -> Callable[[], None]:
    """A preexec_fn: pin the child to `cores` and lift its open-files limit to the hard limit."""
    keep = set(cores)

    def child() -> None:
        os.sched_setaffinity(0, keep)
        _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

    return child


def cpu_s(pid: int) -> float:
    """utime + stime of a process so far, from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass
class ServerLog:
    """The server's log lines by X-Request-Id."""

    lines: dict[str, dict[str, Any]] = field(default_factory=dict)

    def truth(self) -> dict[str, list[int]]:
        """X-Request-Id -> send time (CLOCK_MONOTONIC ns) of each token, or [first, last] without
        per-token stamps: what bench.scaling's FastServer dump gives."""
        out = {}
        for rid, x in self.lines.items():
            if not x.get("first_mono_ns"):
                continue
            toks = x.get("tok_send_us")
            arrive = x["arrive_mono_ns"]
            out[rid] = (
                [arrive + us * 1000 for us in toks] if toks else [x["first_mono_ns"], x["last_mono_ns"]]
            )
        return out

    def ttft_ms(self) -> dict[str, float]:
        """X-Request-Id -> the server's own TTFT (arrival to first token sent), ms."""
        return {rid: x["ttft_us"] / 1e3 for rid, x in self.lines.items() if x.get("first_mono_ns")}

    def arrivals_ns(self) -> dict[str, int]:
        """X-Request-Id -> when the server read the request (CLOCK_MONOTONIC ns)."""
        return {rid: int(x["arrive_mono_ns"]) for rid, x in self.lines.items() if x.get("arrive_mono_ns")}

    def gaps_ms(self) -> dict[str, list[float]]:
        """X-Request-Id -> the true gaps between token sends, ms (needs `log_tokens`)."""
        return {
            rid: [(b - a) / 1e3 for a, b in zip(t, t[1:], strict=False)]
            for rid, x in self.lines.items()
            if (t := x.get("tok_send_us"))
        }


def read_log(text: str) -> ServerLog:
    """Parse the server's JSONL log (blank lines skipped)."""
    log = ServerLog()
    for line in text.splitlines():
        if line.strip():
            x = json.loads(line)
            log.lines[str(x.get("hdr_id") or x.get("tag") or x.get("id"))] = x
    return log


class RefServer:
    """One reference server on `cores` (context manager); `stop()` ends it and returns its log."""

    def __init__(
        self, tools: Tools, cores: Sequence[int], ttft_ms: float, tpot_ms: float, log_tokens: bool = False
    ) -> None:
        self.tools, self.cores = tools, list(cores)
        self.ttft_ms, self.tpot_ms, self.log_tokens = ttft_ms, tpot_ms, log_tokens
        self.dir = tempfile.TemporaryDirectory(prefix="refserver-")
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""

    def start(self) -> RefServer:
        port = free_port()
        cmd = [str(self.tools.server), "-addr", f"127.0.0.1:{port}", "-procs", str(len(self.cores))]
        cmd += ["-ttft-ms", f"{self.ttft_ms:g}", "-tpot-ms", f"{self.tpot_ms:g}", "-model", "bench-model"]
        cmd += ["-log", str(Path(self.dir.name) / "log.jsonl")]
        cmd += ["-log-tokens"] if self.log_tokens else []
        self.proc = subprocess.Popen(
            cmd, preexec_fn=pin(self.cores), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        self.url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 10
        while True:
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=1):
                    return self
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError(f"refserver did not come up on {self.url}") from None
                time.sleep(0.05)

    def cpu(self) -> float:
        """The server's CPU seconds so far."""
        return cpu_s(self.proc.pid) if self.proc else 0.0

    def stop(self) -> ServerLog:
        """SIGTERM, wait, and read the log it writes at exit."""
        if self.proc is None:
            return ServerLog()
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(30)
        self.proc = None
        path = Path(self.dir.name) / "log.jsonl"
        return read_log(path.read_text()) if path.exists() else ServerLog()

    def __enter__(self) -> RefServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(10)
        self.dir.cleanup()
