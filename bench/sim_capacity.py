"""Capacity of the simulated engine on one core: streams and streamed tokens/s with honest step timing.

The engine runs in its own process pinned to one CPU; a lightweight raw-socket client (pinned to
another CPU where there is one) keeps N streams busy, closed loop: each connection sends its next
request as soon as `[DONE]` arrives. For each N we report streamed tokens/s (counted by the client) and
the engine's step lateness (how late each step's tokens reached the sockets compared with the model's
step end; /sim/stats). Capacity = the largest N whose p99 lateness stays within 2 ms.

`python -m bench simengine` (or `make bench`); `python -m bench.sim_capacity --streams 500,1000`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass

LATENESS_BUDGET_MS = 2.0
DEFAULT_STREAMS = (500, 1000, 2000)
# two engine models: the default (8B on an H200: realistic step times, throughput bound by the model)
# and a 1B model whose short steps push tokens/s until the simulator's own CPU is the limit
MODELS = {"8B (default)": ["--model-params", "8e9"], "1B (stress)": ["--model-params", "1e9"]}
ENGINE_FLAGS = ["--max-num-seqs", "4096", "--max-num-batched-tokens", "16384", "--seed", "1"]
PROMPT_TOKENS = 128
OUTPUT_TOKENS = 256


@dataclass
class Point:
    streams: int
    tokens_per_s: float
    engine_cpu: float  # share of one core the engine process used during the window
    lateness_p50_ms: float
    lateness_p99_ms: float
    steps: int

    @property
    def ok(self) -> bool:
        return self.lateness_p99_ms <= LATENESS_BUDGET_MS


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _http(port: int, method: str, path: str) -> dict[str, object]:
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method)
    with urllib.request.urlopen(req, timeout=10) as resp:
        body = resp.read()
    return json.loads(body) if body else {}


class StreamClient(asyncio.Protocol):
    """One keep-alive connection that streams requests back to back and counts token events."""

    def __init__(self, requests: list[bytes], counter: list[int]) -> None:
        self.requests = requests
        self.sent = 0
        self.counter = counter
        self.transport: asyncio.Transport | None = None
        self.tail = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self._send_next()

    def _send_next(self) -> None:
        assert self.transport is not None
        self.transport.write(self.requests[self.sent % len(self.requests)])
        self.sent += 1

    def data_received(self, data: bytes) -> None:
        buf = self.tail + data
        self.counter[0] += buf.count(b'"index":0,"text"')
        if b"0\r\n\r\n" in buf[-16:]:  # end of this chunked response: send the next request
            self._send_next()
        self.tail = buf[-24:]


def _request_bytes(port: int, output_tokens: int) -> bytes:
    body = json.dumps(
        {
            "model": "sim-llama-8b",
            "prompt": list(range(2, 2 + PROMPT_TOKENS)),
            "max_tokens": output_tokens,
            "ignore_eos": True,
            "stream": True,
        }
    ).encode()
    head = (
        f"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    return head + body


def _cpu_seconds(pid: int) -> float:
    """utime + stime of a process (Linux /proc), in seconds."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _measure(port: int, pid: int, streams: int, warmup_s: float, window_s: float) -> Point:
    loop = asyncio.get_running_loop()
    counter = [0]
    # output lengths vary around OUTPUT_TOKENS so streams do not finish (and re-arrive) in lockstep
    variants = [_request_bytes(port, OUTPUT_TOKENS * k // 8) for k in (5, 6, 7, 8, 9, 10, 11)]
    transports = []
    for i in range(streams):
        reqs = variants[i % len(variants) :] + variants[: i % len(variants)]
        t, _p = await loop.create_connection(lambda r=reqs: StreamClient(r, counter), "127.0.0.1", port)
        transports.append(t)
        if i % 50 == 49:
            await asyncio.sleep(0.05)  # stagger arrivals
    await asyncio.sleep(warmup_s)
    await loop.run_in_executor(None, _http, port, "POST", "/sim/stats/reset")
    start_tokens, start, cpu0 = counter[0], time.perf_counter(), _cpu_seconds(pid)
    await asyncio.sleep(window_s)
    tokens, elapsed = counter[0] - start_tokens, time.perf_counter() - start
    cpu = (_cpu_seconds(pid) - cpu0) / elapsed
    stats = await loop.run_in_executor(None, _http, port, "GET", "/sim/stats")
    for t in transports:
        t.abort()
    await asyncio.sleep(1.0)
    late = stats["step_lateness_ms"]
    assert isinstance(late, dict)
    return Point(
        streams, tokens / elapsed, cpu, float(late["p50"]), float(late["p99"]), int(str(stats["steps"]))
    )


def _start_engine(port: int, engine_cpu: int | None, flags: list[str]) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "simengine", "--port", str(port), *ENGINE_FLAGS, *flags]
    preexec = (lambda: os.sched_setaffinity(0, {engine_cpu})) if engine_cpu is not None else None
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, preexec_fn=preexec)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            _http(port, "GET", "/sim/stats")
            return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("simulated engine did not start")


def run(streams_list: tuple[int, ...], warmup_s: float, window_s: float, flags: list[str]) -> list[Point]:
    """Measure each stream count against a fresh engine process."""
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    engine_cpu = cpus[0] if len(cpus) >= 2 else None
    if engine_cpu is not None:
        os.sched_setaffinity(0, set(cpus[1:]))
    points = []
    for n in streams_list:
        port = _free_port()
        proc = _start_engine(port, engine_cpu, flags)
        try:
            points.append(asyncio.run(_measure(port, proc.pid, n, warmup_s, window_s)))
        finally:
            proc.terminate()
            proc.wait(timeout=30)
        p = points[-1]
        verdict = "ok" if p.ok else "over budget"
        print(
            f"  streams={p.streams:5d}  tokens/s={p.tokens_per_s:7.0f}  engine CPU {p.engine_cpu:4.0%}  "
            f"({p.engine_cpu * 1e6 / max(p.tokens_per_s, 1):.1f} us/token)  step lateness "
            f"p50={p.lateness_p50_ms:.2f} ms p99={p.lateness_p99_ms:.2f} ms  steps={p.steps}  {verdict}",
            flush=True,
        )
    return points


def main(argv: list[str] | None = None) -> None:
    """Print the capacity table and the headline figures."""
    ap = argparse.ArgumentParser(prog="bench.sim_capacity")
    ap.add_argument("--streams", default=",".join(map(str, DEFAULT_STREAMS)))
    ap.add_argument("--warmup", type=float, default=4.0)
    ap.add_argument("--window", type=float, default=8.0)
    args = ap.parse_args(argv or [])
    streams = tuple(int(x) for x in args.streams.split(","))
    print(
        f"simulated engine capacity on one core (engine flags: {' '.join(ENGINE_FLAGS)}; "
        f"{PROMPT_TOKENS}-token prompts, {OUTPUT_TOKENS * 5 // 8}-{OUTPUT_TOKENS * 11 // 8} output tokens, "
        "closed loop)"
    )
    for label, flags in MODELS.items():
        print(f"model {label}: {' '.join(flags)}")
        report(run(streams, args.warmup, args.window, flags))


def report(points: list[Point]) -> None:
    """The headline: the most streams within the lateness budget, and the best tokens/s within it."""
    good = [p for p in points if p.ok]
    if not good:
        print(f"  capacity: no stream count kept step lateness p99 within {LATENESS_BUDGET_MS} ms")
        return
    most = max(good, key=lambda p: p.streams)
    fastest = max(good, key=lambda p: p.tokens_per_s)
    print(
        f"  capacity: {most.streams} concurrent streams ({most.tokens_per_s:.0f} tokens/s); "
        f"best {fastest.tokens_per_s:.0f} streamed tokens/s ({fastest.streams} streams); "
        f"step lateness p99 within {LATENESS_BUDGET_MS} ms"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
