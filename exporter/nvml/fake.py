"""A fake of nvidia-ml-py's `pynvml` for tests and the benchmark: N configurable H200-like GPUs.

Errors are injected per GPU and per function: `unsupported` (NVML_ERROR_NOT_SUPPORTED), `missing`
(the binding lacks the function: AttributeError), `lost` (NVML_ERROR_GPU_IS_LOST on every call for
those GPU indices), `init_error` (nvmlInit fails, as without a driver) and `hang(index, seconds)`
(every call on that GPU blocks until the hang is over, as a wedged driver call does). It reuses
pynvml's error class and ctypes structures, which need no driver.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pynvml

NOT_SUPPORTED, GPU_IS_LOST, DRIVER_NOT_LOADED, TIMEOUT = 3, 15, 9, 10
LIBRARY_NOT_FOUND, RM_VERSION_MISMATCH = 12, 18


@dataclass
class FakeGpu:
    """One fake GPU's readings (NVML units: bytes, mW, mJ, MHz, C, %)."""

    index: int
    name: str = "NVIDIA H200"
    memory_total: int = 143771 * 2**20
    memory_used: int = 72177 * 2**20
    memory_reserved: int = 555 * 2**20
    util_gpu: int = 9
    util_mem: int = 3
    power_mw: int = 127_370
    power_limit_mw: int = 700_000
    energy_mj: int = 123_456_789
    temp_c: int = 39
    memory_temp_c: float = 45.0
    sm_clock: int = 1980
    mem_clock: int = 3201
    max_sm_clock: int = 1980
    clock_reasons: int = 0x0
    processes: list[tuple[int, int]] = field(default_factory=lambda: [(736, 72168 * 2**20)])
    gpm_percent: dict[int, float] = field(default_factory=lambda: {1: 42.0, 5: 12.5, 10: 30.0})
    persistence: int = 1
    violation_ns: dict[int, int] = field(default_factory=lambda: {0: 21_828_614_000})

    @property
    def uuid(self) -> str:
        return f"GPU-00000000-0000-0000-0000-{self.index:012d}"

    @property
    def bus_id(self) -> str:
        return f"00000000:{0x18 + self.index:02X}:00.0"


class FakeNvml:
    """Drop-in for the `pynvml` module with N fake GPUs (all NVLink-connected when nvlink=True)."""

    NVML_GPM_METRICS_GET_VERSION = pynvml.NVML_GPM_METRICS_GET_VERSION
    NVML_NVLINK_MAX_LINKS = 18
    c_nvmlGpmMetricsGet_t = pynvml.c_nvmlGpmMetricsGet_t
    NVMLError = pynvml.NVMLError

    def __init__(
        self,
        gpus: int | list[FakeGpu] = 1,
        *,
        unsupported: set[str] | None = None,
        missing: set[str] | None = None,
        lost: set[int] | None = None,
        init_error: int | None = None,
        nvlink: bool = True,
        xid_events: list[tuple[int, int]] | None = None,
    ) -> None:
        self.gpus = [FakeGpu(i) for i in range(gpus)] if isinstance(gpus, int) else gpus
        self.unsupported = set(unsupported or ())
        self.missing_functions = set(missing or ())
        self.lost = set(lost or ())
        self.init_error = init_error
        self.nvlink = nvlink
        self.xid_events = list(xid_events or [])
        self.calls = 0
        self.hung_until: dict[int, float] = {}
        self._thread = threading.local()  # GPM sample owner: each GPU is sampled in its own thread

    def hang(self, index: int, seconds: float) -> None:
        """From now on, every call on GPU `index` blocks until `seconds` have passed (inf: for ever)."""
        self.hung_until[index] = time.monotonic() + seconds

    def _wait_if_hung(self, index: int) -> None:
        until = object.__getattribute__(self, "hung_until").get(index, 0.0)
        while (left := until - time.monotonic()) > 0:
            time.sleep(min(left, 1.0))

    def __getattribute__(self, name: str) -> Any:
        if name.startswith("nvml") and name in object.__getattribute__(self, "missing_functions"):
            raise AttributeError(name)
        return object.__getattribute__(self, name)

    def _gpu(self, fn: str, handle: FakeGpu) -> FakeGpu:
        self.calls += 1
        self._wait_if_hung(handle.index)
        if handle.index in self.lost:
            raise pynvml.NVMLError(GPU_IS_LOST)
        if fn in self.unsupported:
            raise pynvml.NVMLError(NOT_SUPPORTED)
        return handle

    # --- system ---
    def nvmlInit(self) -> None:
        if self.init_error is not None:
            raise pynvml.NVMLError(self.init_error)

    def nvmlShutdown(self) -> None:
        return None

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlSystemGetDriverVersion(self) -> str:
        return "580.159.04"

    def nvmlSystemGetCudaDriverVersion_v2(self) -> int:
        return 13000

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeGpu:
        self._wait_if_hung(index)
        if index in self.lost:
            raise pynvml.NVMLError(GPU_IS_LOST)
        return self.gpus[index]

    # --- identity ---
    def nvmlDeviceGetUUID(self, h: FakeGpu) -> str:
        return self._gpu("nvmlDeviceGetUUID", h).uuid

    def nvmlDeviceGetName(self, h: FakeGpu) -> str:
        return self._gpu("nvmlDeviceGetName", h).name

    def nvmlDeviceGetPciInfo(self, h: FakeGpu) -> Any:
        return SimpleNamespace(busId=self._gpu("nvmlDeviceGetPciInfo", h).bus_id.encode())

    def nvmlDeviceGetMinorNumber(self, h: FakeGpu) -> int:
        return self._gpu("nvmlDeviceGetMinorNumber", h).index

    def nvmlDeviceGetPersistenceMode(self, h: FakeGpu) -> int:
        return self._gpu("nvmlDeviceGetPersistenceMode", h).persistence

    def nvmlDeviceGetEnforcedPowerLimit(self, h: FakeGpu) -> int:
        return self._gpu("nvmlDeviceGetEnforcedPowerLimit", h).power_limit_mw

    # --- readings ---
    def nvmlDeviceGetMemoryInfo(self, h: FakeGpu, version: int | None = None) -> Any:
        g = self._gpu("nvmlDeviceGetMemoryInfo", h)
        free = g.memory_total - g.memory_used - (g.memory_reserved if version else 0)
        info = SimpleNamespace(total=g.memory_total, used=g.memory_used, free=free)
        if version:
            info.reserved = g.memory_reserved
        return info

    def nvmlDeviceGetUtilizationRates(self, h: FakeGpu) -> Any:
        g = self._gpu("nvmlDeviceGetUtilizationRates", h)
        return SimpleNamespace(gpu=g.util_gpu, memory=g.util_mem)

    def nvmlDeviceGetEncoderUtilization(self, h: FakeGpu) -> list[int]:
        self._gpu("nvmlDeviceGetEncoderUtilization", h)
        return [0, 167000]

    def nvmlDeviceGetDecoderUtilization(self, h: FakeGpu) -> list[int]:
        self._gpu("nvmlDeviceGetDecoderUtilization", h)
        return [0, 167000]

    def nvmlDeviceGetPowerUsage(self, h: FakeGpu) -> int:
        return self._gpu("nvmlDeviceGetPowerUsage", h).power_mw

    def nvmlDeviceGetTotalEnergyConsumption(self, h: FakeGpu) -> int:
        return self._gpu("nvmlDeviceGetTotalEnergyConsumption", h).energy_mj

    def nvmlDeviceGetTemperature(self, h: FakeGpu, sensor: int) -> int:
        return self._gpu("nvmlDeviceGetTemperature", h).temp_c

    def nvmlDeviceGetClockInfo(self, h: FakeGpu, clock: int) -> int:
        g = self._gpu("nvmlDeviceGetClockInfo", h)
        return g.mem_clock if clock == 2 else g.sm_clock

    def nvmlDeviceGetMaxClockInfo(self, h: FakeGpu, clock: int) -> int:
        g = self._gpu("nvmlDeviceGetMaxClockInfo", h)
        return g.mem_clock if clock == 2 else g.max_sm_clock

    def nvmlDeviceGetApplicationsClock(self, h: FakeGpu, clock: int) -> int:
        return self.nvmlDeviceGetMaxClockInfo(h, clock)

    def nvmlDeviceGetDefaultApplicationsClock(self, h: FakeGpu, clock: int) -> int:
        return self.nvmlDeviceGetMaxClockInfo(h, clock)

    def nvmlDeviceGetPcieReplayCounter(self, h: FakeGpu) -> int:
        self._gpu("nvmlDeviceGetPcieReplayCounter", h)
        return 0

    def nvmlDeviceGetFieldValues(self, h: FakeGpu, field_ids: list[Any]) -> Any:
        g = self._gpu("nvmlDeviceGetFieldValues", h)
        values = (pynvml.c_nvmlFieldValue_t * len(field_ids))()
        for slot, (field_id, _scope) in enumerate(field_ids):
            values[slot].fieldId = field_id
            if field_id == 82:
                values[slot].valueType, values[slot].value.dVal = 0, g.memory_temp_c
            else:
                values[slot].valueType, values[slot].value.ullVal = 3, 1024 * (g.index + 1)
        return values

    def nvmlDeviceGetTotalEccErrors(self, h: FakeGpu, error_type: int, counter: int) -> int:
        self._gpu("nvmlDeviceGetTotalEccErrors", h)
        return 0

    def nvmlDeviceGetViolationStatus(self, h: FakeGpu, policy: int) -> Any:
        g = self._gpu("nvmlDeviceGetViolationStatus", h)
        return SimpleNamespace(referenceTime=10**15, violationTime=g.violation_ns.get(policy, 0))

    def nvmlDeviceGetRemappedRows(self, h: FakeGpu) -> tuple[int, int, int, int]:
        self._gpu("nvmlDeviceGetRemappedRows", h)
        return (0, 0, 0, 0)

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: FakeGpu) -> int:
        return self._gpu("nvmlDeviceGetCurrentClocksEventReasons", h).clock_reasons

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, h: FakeGpu) -> int:
        return self._gpu("nvmlDeviceGetCurrentClocksThrottleReasons", h).clock_reasons

    def nvmlDeviceGetComputeRunningProcesses(self, h: FakeGpu) -> list[Any]:
        g = self._gpu("nvmlDeviceGetComputeRunningProcesses", h)
        return [SimpleNamespace(pid=pid, usedGpuMemory=used) for pid, used in g.processes]

    def nvmlDeviceGetGraphicsRunningProcesses(self, h: FakeGpu) -> list[Any]:
        self._gpu("nvmlDeviceGetGraphicsRunningProcesses", h)
        return []

    # --- topology ---
    def nvmlDeviceGetP2PStatus(self, a: FakeGpu, b: FakeGpu, index: int) -> int:
        self._gpu("nvmlDeviceGetP2PStatus", a)
        return 0 if self.nvlink else 4  # NVML_P2P_STATUS_OK / NOT_SUPPORTED

    def nvmlDeviceGetTopologyCommonAncestor(self, a: FakeGpu, b: FakeGpu) -> int:
        self._gpu("nvmlDeviceGetTopologyCommonAncestor", a)
        return 30 if abs(a.index - b.index) < 4 else 50

    def nvmlDeviceGetNvLinkState(self, h: FakeGpu, link: int) -> int:
        self._gpu("nvmlDeviceGetNvLinkState", h)
        return 1 if self.nvlink else 0

    def nvmlDeviceGetNvLinkRemotePciInfo(self, h: FakeGpu, link: int) -> Any:
        self._gpu("nvmlDeviceGetNvLinkRemotePciInfo", h)
        return SimpleNamespace(busId=b"00000000:00:00.0")  # an NVSwitch, as on HGX boards

    # --- GPM and events ---
    def nvmlGpmQueryDeviceSupport(self, h: FakeGpu) -> Any:
        self._gpu("nvmlGpmQueryDeviceSupport", h)
        return SimpleNamespace(isSupportedDevice=1)

    def nvmlGpmSampleAlloc(self) -> Any:
        return pynvml.c_nvmlGpmSample_t()

    def nvmlGpmSampleGet(self, h: FakeGpu, sample: Any) -> Any:
        self._gpu("nvmlGpmSampleGet", h)
        self._thread.gpm_owner = h
        return sample

    def nvmlGpmSampleFree(self, sample: Any) -> None:
        return None

    def nvmlGpmMetricsGet(self, request: Any) -> Any:
        owner: FakeGpu = self._thread.gpm_owner
        for slot in range(request.numMetrics):
            metric = request.metrics[slot]
            metric.nvmlReturn = 0
            metric.value = owner.gpm_percent.get(metric.metricId, 0.0)
        return request

    def nvmlEventSetCreate(self) -> str:
        return "event-set"

    def nvmlDeviceRegisterEvents(self, h: FakeGpu, types: int, event_set: Any) -> None:
        return None

    def nvmlEventSetWait(self, event_set: Any, timeout_ms: int) -> Any:
        if not self.xid_events:
            raise pynvml.NVMLError(TIMEOUT)
        index, xid = self.xid_events.pop(0)
        return SimpleNamespace(device=self.gpus[index], eventData=xid)
