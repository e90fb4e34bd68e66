"""Reading one GPU through NVML: identity and the dcgm-exporter default fields, each on its own.

A field whose NVML call is missing, deprecated or unsupported is simply absent from the result;
DeviceLost (from exporter.nvml.session) propagates so the caller drops only that GPU.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from exporter.nvml.session import first_supported, text, try_call

MIB = 2**20
NVML_CLOCK_GRAPHICS, NVML_CLOCK_SM, NVML_CLOCK_MEM = 0, 1, 2
NVML_TEMPERATURE_GPU = 0
NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 0, 1
NVML_VOLATILE_ECC, NVML_AGGREGATE_ECC = 0, 1
NVML_FI_DEV_MEMORY_TEMP = 82
NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX = 138, 139
NVML_MEMORY_V2 = 0x02000028
ALL_LINKS_SCOPE = 0xFFFFFFFF
# nvmlClocksEventReasons bits -> reason label (nvidia-smi -q -d PERFORMANCE names them the same way).
CLOCK_EVENT_REASONS: dict[int, str] = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}


@dataclass(frozen=True)
class GpuIdentity:
    """What labels a GPU's series, the dcgm-exporter way."""

    index: int
    uuid: str
    name: str
    pci_bus_id: str
    minor: int
    driver_version: str

    def labels(self, hostname: str) -> dict[str, str]:
        """dcgm-exporter's label set: gpu, UUID, device, modelName, Hostname, pci_bus_id, driver."""
        return {
            "gpu": str(self.index),
            "UUID": self.uuid,
            "device": f"nvidia{self.minor}",
            "modelName": self.name,
            "Hostname": hostname,
            "pci_bus_id": self.pci_bus_id,
            "DCGM_FI_DRIVER_VERSION": self.driver_version,
        }

    def own_labels(self, hostname: str) -> dict[str, str]:
        """Labels of infergauge_gpu_* series: dcgm's join keys without camelCase `modelName`
        (which `promtool check metrics` flags), so our own names stay lint-clean."""
        return {
            "gpu": str(self.index),
            "UUID": self.uuid,
            "device": f"nvidia{self.minor}",
            "Hostname": hostname,
            "pci_bus_id": self.pci_bus_id,
        }


def read_identity(nvml: Any, handle: Any, index: int, driver_version: str) -> GpuIdentity:
    """UUID, name, PCI bus id and minor number of one GPU."""
    pci = try_call(nvml, "nvmlDeviceGetPciInfo", handle)
    bus_id = text(getattr(pci, "busId", "")) if pci is not None else ""
    minor = try_call(nvml, "nvmlDeviceGetMinorNumber", handle)
    return GpuIdentity(
        index=index,
        uuid=text(try_call(nvml, "nvmlDeviceGetUUID", handle) or ""),
        name=text(try_call(nvml, "nvmlDeviceGetName", handle) or ""),
        pci_bus_id=bus_id,
        minor=int(minor) if minor is not None else index,
        driver_version=driver_version,
    )


def _field_values(nvml: Any, handle: Any, field_ids: list[tuple[int, int]]) -> list[float | None]:
    """nvmlDeviceGetFieldValues, one number or None per (field id, scope)."""
    values = try_call(nvml, "nvmlDeviceGetFieldValues", handle, field_ids)
    if values is None:
        return [None] * len(field_ids)
    out: list[float | None] = []
    for item in values:
        if getattr(item, "nvmlReturn", 1) != 0:
            out.append(None)
            continue
        kind = int(getattr(item, "valueType", 3))
        union = item.value
        attr = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}.get(
            kind, "ullVal"
        )
        out.append(float(getattr(union, attr)))
    return out


def _memory(nvml: Any, h: Any) -> dict[str, float]:
    info = try_call(nvml, "nvmlDeviceGetMemoryInfo", h, NVML_MEMORY_V2) or try_call(
        nvml, "nvmlDeviceGetMemoryInfo", h
    )
    if info is None:
        return {}
    out = {"DCGM_FI_DEV_FB_USED": info.used / MIB, "DCGM_FI_DEV_FB_FREE": info.free / MIB}
    reserved = getattr(info, "reserved", None)
    if reserved is not None:
        out["DCGM_FI_DEV_FB_RESERVED"] = reserved / MIB
    out["infergauge_fb_total"] = info.total / MIB
    return out


def _utilization(nvml: Any, h: Any) -> dict[str, float]:
    rates = try_call(nvml, "nvmlDeviceGetUtilizationRates", h)
    out = (
        {}
        if rates is None
        else {"DCGM_FI_DEV_GPU_UTIL": rates.gpu, "DCGM_FI_DEV_MEM_COPY_UTIL": rates.memory}
    )
    for name, fn in (
        ("DCGM_FI_DEV_ENC_UTIL", "nvmlDeviceGetEncoderUtilization"),
        ("DCGM_FI_DEV_DEC_UTIL", "nvmlDeviceGetDecoderUtilization"),
    ):
        value = try_call(nvml, fn, h)
        if value is not None:
            out[name] = value[0]
    return out


def _clocks_power_temp(nvml: Any, h: Any) -> dict[str, float | None]:
    power_mw = try_call(nvml, "nvmlDeviceGetPowerUsage", h)
    temp = first_supported(nvml, [("nvmlDeviceGetTemperature", (h, NVML_TEMPERATURE_GPU))])
    (mem_temp,) = _field_values(nvml, h, [(NVML_FI_DEV_MEMORY_TEMP, 0)])
    return {
        "DCGM_FI_DEV_SM_CLOCK": try_call(nvml, "nvmlDeviceGetClockInfo", h, NVML_CLOCK_SM),
        "DCGM_FI_DEV_MEM_CLOCK": try_call(nvml, "nvmlDeviceGetClockInfo", h, NVML_CLOCK_MEM),
        "DCGM_FI_DEV_GPU_TEMP": temp,
        "DCGM_FI_DEV_MEMORY_TEMP": mem_temp,
        "DCGM_FI_DEV_POWER_USAGE": None if power_mw is None else power_mw / 1000.0,
    }


def _slow_counters(nvml: Any, h: Any) -> dict[str, float | None]:
    # Measured on an H200 (bench.exporter_scrape --profile): the energy counter takes ~4 ms and the
    # NVLink throughput fields ~1 ms per GPU, so these counters (and static facts) are sampled.
    limit_mw = try_call(nvml, "nvmlDeviceGetEnforcedPowerLimit", h)
    tx, rx = _field_values(
        nvml,
        h,
        [
            (NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, ALL_LINKS_SCOPE),
            (NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX, ALL_LINKS_SCOPE),
        ],
    )
    return {
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": try_call(nvml, "nvmlDeviceGetTotalEnergyConsumption", h),
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": try_call(nvml, "nvmlDeviceGetPcieReplayCounter", h),
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": None if tx is None or rx is None else tx + rx,
        # not dcgm fields: kept under internal keys, exported under infergauge_ names
        "infergauge_power_limit_w": None if limit_mw is None else limit_mw / 1000.0,
        "infergauge_max_sm_clock_mhz": try_call(nvml, "nvmlDeviceGetMaxClockInfo", h, NVML_CLOCK_SM),
    }


_ECC = {
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": (NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_VOLATILE_ECC),
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": (NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC),
    "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL": (NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_AGGREGATE_ECC),
    "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL": (NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_AGGREGATE_ECC),
}


def _errors(nvml: Any, h: Any) -> dict[str, float | None]:
    out: dict[str, float | None] = {
        name: try_call(nvml, "nvmlDeviceGetTotalEccErrors", h, err, counter)
        for name, (err, counter) in _ECC.items()
    }
    rows = try_call(nvml, "nvmlDeviceGetRemappedRows", h)
    if rows is not None:
        corr, unc, _pending, failure = rows
        out["DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS"] = corr
        out["DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS"] = unc
        out["DCGM_FI_DEV_ROW_REMAP_FAILURE"] = failure
    return out


# DCGM's clock-limit durations (commented out in dcgm-exporter's default CSV, same names and unit):
# nvmlDeviceGetViolationStatus(policy).violationTime is in ns, DCGM reports microseconds.
VIOLATIONS: dict[str, int] = {
    "DCGM_FI_DEV_POWER_VIOLATION": 0,  # NVML_PERF_POLICY_POWER
    "DCGM_FI_DEV_THERMAL_VIOLATION": 1,
    "DCGM_FI_DEV_SYNC_BOOST_VIOLATION": 2,
    "DCGM_FI_DEV_BOARD_LIMIT_VIOLATION": 3,
    "DCGM_FI_DEV_LOW_UTIL_VIOLATION": 4,
    "DCGM_FI_DEV_RELIABILITY_VIOLATION": 5,
}


def read_slow_fields(nvml: Any, h: Any) -> dict[str, float]:
    """Counters and static facts that are slow to read: energy, PCIe replays, NVLink bytes, power
    limit, max SM clock and DCGM_FI_DEV_*_VIOLATION (us; ~1 ms of NVML time per policy on an H200).
    The background sampler reads them every few seconds instead of on every scrape."""
    out: dict[str, float] = {}
    for name, value in _slow_counters(nvml, h).items():
        if value is not None:
            out[name] = float(value)
    for name, policy in VIOLATIONS.items():
        status = try_call(nvml, "nvmlDeviceGetViolationStatus", h, policy)
        if status is not None:
            out[name] = status.violationTime / 1000.0
    return out


READERS: tuple[Callable[[Any, Any], dict[str, Any]], ...] = (
    _memory,
    _utilization,
    _clocks_power_temp,
    _errors,
)


def read_fields(nvml: Any, handle: Any) -> dict[str, float]:
    """Every dcgm-named field this GPU answers (units as dcgm-exporter: MiB, W, mJ, MHz, C, %)."""
    values: dict[str, float] = {}
    for reader in READERS:
        for name, value in reader(nvml, handle).items():
            if value is not None:
                values[name] = float(value)
    return values


def read_clock_event_reasons(nvml: Any, handle: Any) -> int | None:
    """Bitmask of active clocks-event (throttle) reasons; the deprecated name as fallback."""
    return first_supported(
        nvml,
        [
            ("nvmlDeviceGetCurrentClocksEventReasons", (handle,)),
            ("nvmlDeviceGetCurrentClocksThrottleReasons", (handle,)),
        ],
    )


def read_processes(nvml: Any, handle: Any) -> list[tuple[int, int | None]]:
    """(pid, used GPU memory bytes or None) of compute and graphics processes on this GPU."""
    seen: dict[int, int | None] = {}
    for fn in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
        for proc in try_call(nvml, fn, handle) or []:
            used = getattr(proc, "usedGpuMemory", None)
            seen[int(proc.pid)] = int(used) if isinstance(used, int) else seen.get(int(proc.pid))
    return sorted(seen.items())
