"""`python -m bench kstamp`: what a kernel receive stamp costs per read (loadgen.transport.kernel_stamps).

The raw client (in this process, pinned to one core; the reference server on another: VSGO_CORES=
client,server as `bench vsgo`) reads KSTAMP_STREAMS (default 64) concurrent streams of 256 tokens at
TPOT 2 ms, three rounds, with kernel stamps (`recvmsg` + `SCM_TIMESTAMPNS`) read by the C reader
(`loadgen.transport._kread`, where built), with kernel stamps read in Python (`LOADGEN_NATIVE=0`; the
mode `python`), and with read stamps (the option switched off: uvloop's transport reads), in
KSTAMP_BLOCKS (default 5) blocks whose order alternates. Prints the process CPU per read of each
(time.process_time over the rounds / the reads: the whole client, framing and parsing included) and
the differences, per block and median.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import time
from collections.abc import Mapping, Sequence
from unittest import mock

from bench.refbench import RefServer, Tools
from bench.vs_go import bench_setup, cores_for
from loadgen.records import RequestRecord
from loadgen.transport import evloop, kernel_stamps
from loadgen.transport.rawhttp import RawClient

TOKENS, TTFT_MS, TPOT_MS, ROUNDS = 256, 20.0, 2.0, 3
MODES = ("kernel", "python", "read")  # C reader, Python reader (both kernel stamps), read stamps


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
    """µs of CPU per read in `mode` (MODES)."""
    option = kernel_stamps.SO_TIMESTAMPNS
    if mode == "read":
        kernel_stamps.SO_TIMESTAMPNS = None
    switch = {"LOADGEN_NATIVE": "0"} if mode == "python" else {}
    try:
        with (
            mock.patch.dict(os.environ, switch),
            RefServer(tools, [server_core], TTFT_MS, TPOT_MS, False) as server,
        ):
            cpu_s, reads = evloop.run(_rounds(server.url, streams))
        used = kernel_stamps.arrival_stamps(), kernel_stamps.native_reads()
    finally:
        kernel_stamps.SO_TIMESTAMPNS = option
    want = ("read" if mode == "read" else "kernel", mode == "kernel")
    if used != want:
        raise RuntimeError(f"asked for {mode}, the reads had {used} ({kernel_stamps.counts()})")
    return cpu_s / max(reads, 1) * 1e6


def summary(per: Mapping[str, Sequence[float]]) -> list[str]:
    """The result lines: each mode's median µs per read, and each mode minus read stamps (median of
    the per-block differences)."""
    med = {m: statistics.median(v) for m, v in per.items()}
    names = {
        "kernel": "kernel stamps, C reader",
        "python": "kernel stamps, Python reader",
        "read": "read stamps",
    }
    lines = ["CPU per read, " + "; ".join(f"{names[m]}: {med[m]:.2f} us" for m in per)]
    for mode in per:
        if mode != "read":
            diffs = [k - r for k, r in zip(per[mode], per["read"], strict=True)]
            lines.append(
                f"{mode} - read: {statistics.median(diffs):+.2f} us a read (median of per-block differences; "
                f"{statistics.median(diffs) / med['read'] * 100:+.1f}%)"
            )
    return lines


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
    modes = MODES if kernel_stamps.native() else ("python", "read")
    if "kernel" not in modes:
        print("kstamp: the C reader is not built (or LOADGEN_NATIVE=0): kernel stamps are read in Python")
    per: dict[str, list[float]] = {m: [] for m in modes}
    for block in range(blocks):
        for mode in modes if block % 2 == 0 else modes[::-1]:
            per[mode].append(measure(tools, mode, streams, server))
        cells = ", ".join(f"{m} {per[m][-1]:.2f}" for m in modes)
        print(f"  block {block + 1}: {cells} us a read")
    for line in summary(per):
        print(line)
