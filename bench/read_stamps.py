"""`python -m bench kstamp`: what a kernel receive stamp costs per read (loadgen.transport.kernel_stamps).

The raw client (in this process, pinned to one core; the reference server on another: VSGO_CORES=
client,server as `bench vsgo`) reads KSTAMP_STREAMS (default 64) concurrent streams of 256 tokens at
TPOT 2 ms, three rounds, once with kernel stamps (`recvmsg` + `SCM_TIMESTAMPNS`) and once with read
stamps (the option switched off: uvloop's transport reads), in KSTAMP_BLOCKS (default 5) blocks whose
order alternates. Prints the process CPU per read of each (time.process_time over the rounds / the
reads: the whole client, framing and parsing included) and their difference, per block and median.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import time
from collections.abc import Mapping, Sequence

from bench.refbench import RefServer, Tools
from bench.vs_go import bench_setup, cores_for
from loadgen.records import RequestRecord
from loadgen.transport import evloop, kernel_stamps
from loadgen.transport.rawhttp import RawClient

TOKENS, TTFT_MS, TPOT_MS, ROUNDS = 256, 20.0, 2.0, 3
MODES = ("kernel", "read")


async def _rounds(url: str, streams: int) -> tuple[float, int]:
    """(CPU s, reads) of ROUNDS rounds of `streams` concurrent streams."""
    body = json.dumps({"model": "bench-model", "prompt": "hi " * 32, "max_tokens": TOKENS, "stream": True})
    client = RawClient(url, None, 0, 60.0)

    async def one(i: int) -> int:
        record = RequestRecord(i, f"kstamp-{i}", False, 0, 32, TOKENS)
        got = await client.send(record, "/v1/completions", body.encode())
        return len(got.raw or ())

    started, reads = time.process_time(), 0
    try:
        for r in range(ROUNDS):
            reads += sum(await asyncio.gather(*(one(r * streams + i) for i in range(streams))))
    finally:
        client.close()
    return time.process_time() - started, reads


def measure(tools: Tools, mode: str, streams: int, server_core: int) -> float:
    """µs of CPU per read with `mode` stamps ("kernel" or "read")."""
    option = kernel_stamps.SO_TIMESTAMPNS
    if mode == "read":
        kernel_stamps.SO_TIMESTAMPNS = None
    try:
        with RefServer(tools, [server_core], TTFT_MS, TPOT_MS, False) as server:
            cpu_s, reads = evloop.run(_rounds(server.url, streams))
        used = kernel_stamps.arrival_stamps()
    finally:
        kernel_stamps.SO_TIMESTAMPNS = option
    if used != mode:
        raise RuntimeError(f"asked for {mode} stamps, the reads had {used} ({kernel_stamps.counts()})")
    return cpu_s / max(reads, 1) * 1e6


def summary(per: Mapping[str, Sequence[float]]) -> list[str]:
    """The result lines: each mode's median µs per read, and kernel minus read (median of blocks)."""
    med = {m: statistics.median(v) for m, v in per.items()}
    diffs = [k - r for k, r in zip(per["kernel"], per["read"], strict=True)]
    return [
        f"CPU per read, kernel stamps: {med['kernel']:.2f} us; read stamps: {med['read']:.2f} us",
        f"kernel - read: {statistics.median(diffs):+.2f} us a read (median of per-block differences; "
        f"{statistics.median(diffs) / med['read'] * 100:+.1f}%)",
    ]


def main() -> None:
    """Print the per-read CPU of kernel and read stamps (see module docstring)."""
    if kernel_stamps.SO_TIMESTAMPNS is None:
        print("kstamp: skipped, no SO_TIMESTAMPNS on this platform (loadgen uses read stamps here)")
        return
    setup = bench_setup("kstamp", "the reference server")
    if setup is None:
        return
    tools, usable = setup
    try:
        client, server = cores_for(usable, os.environ.get("VSGO_CORES"))
        blocks = int(os.environ.get("KSTAMP_BLOCKS", "5"))
        streams = int(os.environ.get("KSTAMP_STREAMS", "64"))
    except ValueError as exc:
        raise SystemExit(f"kstamp: {exc}") from None
    os.sched_setaffinity(0, [client])
    print(f"kstamp: client on core {client}, server on core {server}; {streams} streams x {TOKENS} tokens")
    per: dict[str, list[float]] = {m: [] for m in MODES}
    for block in range(blocks):
        for mode in MODES if block % 2 == 0 else MODES[::-1]:
            per[mode].append(measure(tools, mode, streams, server))
        print(f"  block {block + 1}: kernel {per['kernel'][-1]:.2f} us a read, read {per['read'][-1]:.2f}")
    for line in summary(per):
        print(line)
