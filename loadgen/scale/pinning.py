"""Which cores a `--workers N` run's processes use: each worker its own core from the ones this process
may use (sched_getaffinity), and the coordinator one more when there are enough.

A worker sharing its core with another worker or with the coordinator (its progress polls, the
scrapes it answers, the merge) sends late whenever the other one runs: the scheduler hands a core
over in slices of milliseconds, the size of the schedule-lag budget. With at least N + 1 cores the
coordinator keeps the first and worker i gets the (i + 1)-th; with N cores or fewer, worker i
gets core i mod the count and the coordinator is not pinned; where affinity cannot be read or set
(not Linux) nothing is pinned."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
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
            "rule": "one core per worker; the coordinator its own when cores > workers",
        }


def plan_cores(usable: Sequence[int], workers: int) -> CorePlan:
    """The core plan for `workers` over the `usable` cores (see module docstring)."""
    cores = sorted(usable)
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
