"""S fast servers (bench.loadgen_client's FastServer) on ONE port with SO_REUSEPORT, each in its own
process pinned to its own core; the union of their dumps is the ground truth of what was sent when
(perf_counter_ns right after each chunk's write: CLOCK_MONOTONIC, shared by every process on the host)."""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import os
from collections.abc import Sequence
from multiprocessing.connection import Connection
from pathlib import Path

from bench.loadgen_client import serve


def _server_main(conn: Connection, cpu: int, port: int, ttft_s: float, itl_s: float) -> None:
    os.sched_setaffinity(0, {cpu})
    asyncio.run(serve(conn, ttft_s, itl_s, port, reuse_port=True))


def _cpu_s(pid: int) -> float:
    """utime + stime of a process so far, from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class ServerGroup:
    """S fast servers on one SO_REUSEPORT port, server i pinned to cpus[i] (context manager)."""

    def __init__(self, cpus: Sequence[int], ttft_s: float, itl_s: float) -> None:
        self.cpus, self.ttft_s, self.itl_s = list(cpus), ttft_s, itl_s
        self.procs: list[tuple[mp.process.BaseProcess, Connection]] = []
        self.port = 0
        self.split: list[int] = []

    def __enter__(self) -> ServerGroup:
        for cpu in self.cpus:
            parent, child = mp.Pipe()
            proc = mp.get_context("fork").Process(
                target=_server_main, args=(child, cpu, self.port, self.ttft_s, self.itl_s), daemon=True
            )
            proc.start()
            self.port = parent.recv()
            self.procs.append((proc, parent))
        self.url = f"http://127.0.0.1:{self.port}"
        return self

    def cpu(self) -> list[float]:
        """Each server's CPU seconds so far."""
        return [_cpu_s(p.pid or 0) for p, _ in self.procs]

    def dump(self) -> dict[str, list[int]]:
        """The union of the servers' finished streams: X-Request-Id -> send time of each token."""
        truth: dict[str, list[int]] = {}
        self.split = []  # streams each server finished: how evenly SO_REUSEPORT spread the connections
        for _, conn in self.procs:
            conn.send("dump")
            got = dict(conn.recv())
            self.split.append(len(got))
            truth.update(got)
        return truth

    def __exit__(self, *exc: object) -> None:
        for proc, conn in self.procs:
            conn.send("stop")
            proc.join(10)
