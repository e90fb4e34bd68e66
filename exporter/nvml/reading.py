"""One GPU's whole scrape-time reading as plain values, taken in that GPU's lane (see lanes.py)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from exporter.nvml.readers import (
    GpuIdentity,
    read_clock_event_reasons,
    read_fields,
    read_identity,
    read_processes,
    read_slow_fields,
)
from exporter.nvml.session import DeviceLost

DEFAULT_TIMEOUT_S = 0.3  # deadline for one GPU's reading in a scrape (a healthy H200 answers in ms)


@dataclass(frozen=True)
class GpuReading:
    """What a scrape emits for one GPU, and when (monotonic seconds) it was read."""

    identity: GpuIdentity
    handle: Any
    fields: dict[str, float]
    clock_reasons: int | None
    processes: list[tuple[int, int | None]]
    read_at: float

    def age_s(self, now: float) -> float:
        """Seconds since this reading was taken."""
        return max(0.0, now - self.read_at)


def read_gpu(nvml: Any, index: int, driver: str, identity: GpuIdentity | None, *, slow: bool) -> GpuReading:
    """Read GPU `index` (identity only when not known yet; slow fields when nobody samples them)."""
    handle = nvml.nvmlDeviceGetHandleByIndex(index)
    if identity is None:
        identity = read_identity(nvml, handle, index, driver)
        if not identity.uuid:
            raise DeviceLost(f"gpu {index} has no UUID")
    fields = read_fields(nvml, handle)
    if slow:
        fields.update(read_slow_fields(nvml, handle))
    return GpuReading(
        identity=identity,
        handle=handle,
        fields=fields,
        clock_reasons=read_clock_event_reasons(nvml, handle),
        processes=read_processes(nvml, handle),
        read_at=time.monotonic(),
    )
