"""Which cores a `--workers N` run's processes use: each worker its own core from the ones this process
may use (sched_getaffinity), and the coordinator one more when there are enough.

A worker sharing its core with another worker or with the coordinator (its progress polls, the
scrapes it answers, the merge) sends late whenever the other one runs: the scheduler hands a core
over in slices of milliseconds, the size of the schedule-lag budget. With at least N + 1 cores the
coordinator keeps the first and worker i gets the (i + 1)-th; with N cores or fewer, worker i
gets core i mod the count and the coordinator is not pinned; where affinity cannot be read or set
(not Linux) nothing is pinned. "Core" is a CPU the kernel lists; where two of them are SMT siblings
(hyperthreads of one physical core, /sys/.../topology/thread_siblings_list) the CPUs are taken one
per physical core first, so eight workers on a host of eight cores with two threads each get eight
physical cores, not four."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class CorePlan:
    """The coordinator's cores (None: not pinned) and each worker's core (None: not pinned)."""

    coordinator: tuple[int, ...] | None
    workers: tuple[int | None, ...]

    def describe(self) -> dict[str, Any]:
        """The manifest's `workers.cores` block."""
        return {
            "coordinator": list(self.coordinator) if self.coordinator is not None else None,
            "workers": list(self.workers),
            "rule": "one core per worker, physical cores first; the coordinator its own when cores > workers",
        }


def physical_first(usable: Sequence[int], siblings: Callable[[int], str | None]) -> list[int]:
    """The usable CPUs, one per physical core first (by their lowest CPU), then the second thread of
    each, and so on; `siblings(cpu)` is its thread_siblings_list ("0,8", "0-1"; None: unknown)."""
    groups: dict[str, list[int]] = {}
    for cpu in sorted(usable):
        groups.setdefault(siblings(cpu) or str(cpu), []).append(cpu)
    rounds = max((len(g) for g in groups.values()), default=0)
    return [g[k] for k in range(rounds) for g in sorted(groups.values()) if k < len(g)]


def sysfs_siblings(cpu: int, root: str = "/sys/devices/system/cpu") -> str | None:
    """The kernel's list of the CPUs sharing `cpu`'s physical core (None where it cannot be read)."""
    try:
        return Path(f"{root}/cpu{cpu}/topology/thread_siblings_list").read_text().strip()
    except OSError:
        return None


def plan_cores(
    usable: Sequence[int], workers: int, siblings: Callable[[int], str | None] = sysfs_siblings
) -> CorePlan:
    """The core plan for `workers` over the `usable` cores (see module docstring)."""
    cores = physical_first(usable, siblings)
    if not cores:
        return CorePlan(None, (None,) * workers)
    if len(cores) > workers:
        return CorePlan((cores[0],), tuple(cores[1 : workers + 1]))
    return CorePlan(None, tuple(cores[i % len(cores)] for i in range(workers)))


def usable_cores() -> list[int]:
    """The cores this process may run on (empty where the platform cannot say)."""
    getter = getattr(os, "sched_getaffinity", None)
    return sorted(getter(0)) if getter is not None else []


def pin(cores: Sequence[int] | None) -> None:
    """Run this process on `cores` from now on (nothing when None or where it cannot be set)."""
    setter = getattr(os, "sched_setaffinity", None)
    if cores is None or setter is None:
        return
    with contextlib.suppress(OSError):
        setter(0, set(cores))
