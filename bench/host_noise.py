"""What the host took from a bench point's cores while it ran: the hypervisor's steal time on those CPUs
(`/proc/stat`, the 8th time column: time a virtual CPU was ready but the host ran something else). A
point that fails while it is high failed on the host, not on loadgen; the bench prints it beside the
row so a reader can tell the two apart. (Involuntary context switches would not tell: the raw client's
real-time waker thread preempts its own event loop at every send.) Pure but for `cpu_times`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

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
