"""What the host took from a bench point's cores while it ran: the hypervisor's steal time on those CPUs
(`/proc/stat`, the 8th time column: time a virtual CPU was ready but the host ran something else). A
point that fails while it is high failed on the host, not on loadgen; the bench prints it beside the
row so a reader can tell the two apart. (Involuntary context switches would not tell: the raw client's
real-time waker thread preempts its own event loop at every send.) Two probes run on the client's core
just before a point: how late a 1 ms sleep wakes (`timer_overshoot_ms`, the retry's quiet test) and how
fast a fixed piece of Python work runs (`work_ms`)."""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path

from loadgen.scale.pinning import pin

STAT = Path("/proc/stat")


def cpu_times(text: str | None = None) -> dict[int, tuple[int, int]]:
    """Per CPU: (steal ticks, all ticks) from /proc/stat (or `text`); {} where there is none."""
    if text is None:
        try:
            text = STAT.read_text()
        except OSError:
            return {}
    out: dict[int, tuple[int, int]] = {}
    for line in text.splitlines():
        name, _, rest = line.partition(" ")
        if not name.startswith("cpu") or name == "cpu":
            continue
        try:
            ticks = [int(x) for x in rest.split()]
            cpu = int(name[3:])
        except ValueError:
            continue
        steal = ticks[7] if len(ticks) > 7 else 0
        out[cpu] = (steal, sum(ticks[:8]))
    return out


def steal_share(
    before: Mapping[int, tuple[int, int]], after: Mapping[int, tuple[int, int]], cores: Iterable[int]
) -> float | None:
    """The share of `cores`' time the hypervisor stole between the two snapshots; None when unknown."""
    steal = total = 0
    for cpu in cores:
        if cpu in before and cpu in after:
            steal += after[cpu][0] - before[cpu][0]
            total += after[cpu][1] - before[cpu][1]
    return steal / total if total > 0 else None


def noise_note(steal: float | None) -> str:
    """`  steal 1.2%` for a row (empty when nothing was stolen or it is unknown)."""
    return f"  steal {100 * steal:.1f}%" if steal else ""


QUIET_P99_MS = 0.3  # a 1 ms sleep overshooting more than this at p99: the host is taking the core
PROBE_SLEEPS = 200


@contextlib.contextmanager
def _on_core(core: int | None) -> Iterator[None]:
    """Run this process on `core` meanwhile (loadgen.scale.pinning.pin), then where it ran before."""
    keep = sorted(os.sched_getaffinity(0))
    pin(None if core is None else [core])
    try:
        yield
    finally:
        pin(keep)


def timer_overshoot_ms(core: int | None, sleeps: int = PROBE_SLEEPS) -> float:
    """p99 of how late `time.sleep(1 ms)` wakes on `core` (this process pinned there meanwhile), in ms.
    On a quiet host this is ~0.1 ms; a neighbour or the hypervisor taking the core shows as more."""
    late = []
    with _on_core(core):
        for _ in range(sleeps):
            t = time.perf_counter_ns()
            time.sleep(0.001)
            late.append((time.perf_counter_ns() - t) / 1e6 - 1.0)
    late.sort()
    return late[min(len(late) - 1, int(0.99 * len(late)))]


WORK_N = 300_000  # a fixed piece of interpreter work: 14-28 ms on the H200 host's cores (2026-12-02)


def work_ms(core: int | None, repeats: int = 3) -> float:
    """The fastest of `repeats` timings of a fixed piece of Python work on `core`, in ms: the core's
    speed as loadgen sees it. A host whose neighbours share the physical core (SMT siblings, memory
    bandwidth) slows it without stealing time or delaying timers; this shows it."""
    best = math.inf
    with _on_core(core):
        for _ in range(repeats):
            t = time.perf_counter_ns()
            sum(i * i for i in range(WORK_N))
            best = min(best, (time.perf_counter_ns() - t) / 1e6)
    return best


def wait_for_quiet(
    core: int | None, limit_s: float, probe: Callable[[int | None], float] = timer_overshoot_ms
) -> tuple[float, float]:
    """Probe `core` until the timer overshoot p99 is under QUIET_P99_MS or `limit_s` has passed;
    (the last probe's ms, seconds waited)."""
    t0 = time.monotonic()
    got = probe(core)
    while got >= QUIET_P99_MS and time.monotonic() - t0 < limit_s:
        time.sleep(1.0)
        got = probe(core)
    return got, time.monotonic() - t0
