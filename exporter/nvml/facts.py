"""The manifest's `gpus` list and `topology`: identity, memory, driver/CUDA, clocks, locks, power limit."""

from __future__ import annotations

from functools import partial
from typing import Any

from exporter.nvml.lanes import SYSTEM, TOPOLOGY, CallTimeout
from exporter.nvml.readers import (
    CLOCK_EVENT_REASONS,
    NVML_CLOCK_GRAPHICS,
    NVML_CLOCK_MEM,
    NVML_CLOCK_SM,
    read_clock_event_reasons,
    read_fields,
    read_identity,
    read_processes,
)
from exporter.nvml.reading import DEFAULT_TIMEOUT_S
from exporter.nvml.session import NvmlSession, NvmlUnavailable, text, try_call
from exporter.nvml.topology import interconnect, read_matrix
from exporter.procs import process_name

_CLOCKS = {"graphics": NVML_CLOCK_GRAPHICS, "sm": NVML_CLOCK_SM, "memory": NVML_CLOCK_MEM}


def cuda_version(nvml: Any) -> str | None:
    """The driver's CUDA version as 'major.minor' (13000 -> '13.0')."""
    raw = try_call(nvml, "nvmlSystemGetCudaDriverVersion_v2") or try_call(
        nvml, "nvmlSystemGetCudaDriverVersion"
    )
    return None if raw is None else f"{int(raw) // 1000}.{int(raw) % 1000 // 10}"


def _clock_table(nvml: Any, handle: Any, fn: str) -> dict[str, int]:
    out = {}
    for name, clock in _CLOCKS.items():
        value = try_call(nvml, fn, handle, clock)
        if value is not None:
            out[f"{name}_mhz"] = int(value)
    return out


def clock_locks(nvml: Any, handle: Any, reasons: list[str]) -> dict[str, Any]:
    """Applied application clocks vs defaults; `locked` when they differ or the GPU reports the setting."""
    applied = _clock_table(nvml, handle, "nvmlDeviceGetApplicationsClock")
    default = _clock_table(nvml, handle, "nvmlDeviceGetDefaultApplicationsClock")
    return {
        "applications_clocks": applied,
        "default_applications_clocks": default,
        "locked": bool(applied and default and applied != default)
        or "applications_clocks_setting" in reasons,
    }


def gpu_entry(nvml: Any, handle: Any, index: int, driver: str, cuda: str | None) -> dict[str, Any]:
    """One GPU's manifest entry (DeviceLost propagates)."""
    ident = read_identity(nvml, handle, index, driver)
    fields = read_fields(nvml, handle)
    mask = read_clock_event_reasons(nvml, handle)
    reasons = [name for bit, name in CLOCK_EVENT_REASONS.items() if mask is not None and int(mask) & bit]
    limit_mw = try_call(nvml, "nvmlDeviceGetEnforcedPowerLimit", handle)
    persistence = try_call(nvml, "nvmlDeviceGetPersistenceMode", handle)
    total_mib = fields.get("infergauge_fb_total")
    return {
        "index": index,
        "name": ident.name,
        "uuid": ident.uuid,
        "pci_bus_id": ident.pci_bus_id,
        "memory_total_bytes": int(total_mib * 2**20) if total_mib is not None else None,
        "memory_used_bytes": int(fields["DCGM_FI_DEV_FB_USED"] * 2**20)
        if "DCGM_FI_DEV_FB_USED" in fields
        else None,
        "driver_version": driver,
        "cuda_version": cuda,
        "persistence_mode": None if persistence is None else bool(persistence),
        "clocks": {
            **_clock_table(nvml, handle, "nvmlDeviceGetClockInfo"),
            **{f"max_{k}": v for k, v in _clock_table(nvml, handle, "nvmlDeviceGetMaxClockInfo").items()},
        },
        "clock_locks": clock_locks(nvml, handle, reasons),
        "clock_event_reasons": reasons,
        "power_limit_w": None if limit_mw is None else limit_mw / 1000.0,
        "power_usage_w": fields.get("DCGM_FI_DEV_POWER_USAGE"),
        "temperature_c": fields.get("DCGM_FI_DEV_GPU_TEMP"),
        "errors": {k: v for k, v in fields.items() if "ECC" in k or "REMAP" in k},
        "processes": [
            {"pid": pid, "process": process_name(pid), "used_bytes": used}
            for pid, used in read_processes(nvml, handle)
        ],
    }


def _entry_and_handle(nvml: Any, index: int, driver: str, cuda: str | None) -> tuple[dict[str, Any], Any]:
    handle = nvml.nvmlDeviceGetHandleByIndex(index)
    return gpu_entry(nvml, handle, index, driver, cuda), handle


def gpu_manifest(
    session: NvmlSession, timeout_s: float = DEFAULT_TIMEOUT_S
) -> tuple[list[dict[str, Any]], dict[str, Any], str | None]:
    """(gpus, topology, error): error says why NVML could not be read, or which GPU was lost or hung.

    Each GPU is read in its own lane under one deadline, so a hung GPU is left out, not waited for.
    """
    unknown: dict[str, Any] = {"matrix": [], "interconnect": "unknown"}
    try:
        nvml = session.get_within()
        driver, cuda, count = session.lanes.call(SYSTEM, "facts", partial(_system_facts, nvml), timeout_s)
    except (NvmlUnavailable, CallTimeout) as exc:
        return [], unknown, str(exc)  # (an error nvmlInit raised reaches here as NvmlUnavailable)
    calls = {i: partial(_entry_and_handle, nvml, i, driver, cuda) for i in range(count)}
    jobs = session.lanes.gather("facts", calls, timeout_s)
    gpus, handles, error = [], [], None
    for index, job in jobs.items():
        if not job.done.is_set():
            error = f"gpu {index}: no answer from NVML within {timeout_s:g} s"
        elif job.error is not None:
            error = f"gpu {index}: {job.error}"
        else:
            gpus.append(job.value[0])
            handles.append(job.value[1])
    bus_ids = [gpu["pci_bus_id"] for gpu in gpus]
    try:
        matrix = session.lanes.call(
            TOPOLOGY, "facts", partial(read_matrix, nvml, handles, bus_ids), timeout_s
        )
    except CallTimeout as exc:
        return gpus, unknown, error or str(exc)
    return gpus, {"matrix": matrix, "interconnect": interconnect(matrix)}, error


def _system_facts(nvml: Any) -> tuple[str, str | None, int]:
    driver = text(try_call(nvml, "nvmlSystemGetDriverVersion") or "")
    return driver, cuda_version(nvml), int(nvml.nvmlDeviceGetCount())


def first_gpu_hint(session: NvmlSession, timeout_s: float = DEFAULT_TIMEOUT_S) -> tuple[int | None, str]:
    """(memory total bytes, name) of GPU 0, for engines' hardware-dependent defaults; (None, '') if none."""
    try:
        nvml = session.get_within()
        return session.lanes.call(0, "hint", partial(_hint, nvml), timeout_s)  # type: ignore[no-any-return]
    except Exception:  # no NVML, no GPU, lost or hung GPU: the defaults stay "auto"
        return None, ""


def _hint(nvml: Any) -> tuple[int | None, str]:
    if int(nvml.nvmlDeviceGetCount()) == 0:
        return None, ""
    handle = nvml.nvmlDeviceGetHandleByIndex(0)
    memory = try_call(nvml, "nvmlDeviceGetMemoryInfo", handle)
    name = text(try_call(nvml, "nvmlDeviceGetName", handle) or "")
    return (int(memory.total) if memory is not None else None), name
