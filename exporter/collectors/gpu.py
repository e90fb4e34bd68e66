"""GPU collector: dcgm-exporter's default fields under its names, labels and units, plus what it lacks.

Beyond dcgm-exporter: `infergauge_gpu_clock_event_active{reason}`, `infergauge_gpu_process_memory_bytes`,
`infergauge_gpu_topology_info{gpu,peer,link}`, power/utilization peaks since the last scrape, and
`infergauge_gpu_up` (0 for a GPU that stopped answering: its other series are dropped, not the others').
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any

from prometheus_client.core import Metric

from exporter.families import Families
from exporter.gpu_read import (
    GpuIdentity,
    read_clock_event_reasons,
    read_fields,
    read_identity,
    read_processes,
    read_slow_fields,
)
from exporter.gpu_sampler import GpuSampler
from exporter.nvml import DeviceLost, NvmlSession, text, try_call
from exporter.procs import process_name
from exporter.topology import read_matrix

# dcgm-exporter's type and help per field (etc/default-counters.csv). Its counters have no `_total`
# suffix, which `promtool check metrics` rejects for the counter type: they are exposed untyped
# with the same name and value, so PromQL (rate, increase) and dashboards work unchanged.
DCGM_FIELDS: dict[str, tuple[str, str]] = {
    "DCGM_FI_DEV_SM_CLOCK": ("gauge", "SM clock frequency (in MHz)."),
    "DCGM_FI_DEV_MEM_CLOCK": ("gauge", "Memory clock frequency (in MHz)."),
    "DCGM_FI_DEV_MEMORY_TEMP": ("gauge", "Memory temperature (in C)."),
    "DCGM_FI_DEV_GPU_TEMP": ("gauge", "GPU temperature (in C)."),
    "DCGM_FI_DEV_POWER_USAGE": ("gauge", "Power draw (in W)."),
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": ("untyped", "Total energy consumption since boot (in mJ)."),
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": ("untyped", "Total number of PCIe retries."),
    "DCGM_FI_DEV_GPU_UTIL": ("gauge", "GPU utilization (in %)."),
    "DCGM_FI_DEV_MEM_COPY_UTIL": ("gauge", "Memory utilization (in %)."),
    "DCGM_FI_DEV_ENC_UTIL": ("gauge", "Encoder utilization (in %)."),
    "DCGM_FI_DEV_DEC_UTIL": ("gauge", "Decoder utilization (in %)."),
    "DCGM_FI_DEV_XID_ERRORS": ("gauge", "Value of the last XID error encountered."),
    "DCGM_FI_DEV_POWER_VIOLATION": ("untyped", "Throttling duration due to power constraints (in us)."),
    "DCGM_FI_DEV_THERMAL_VIOLATION": ("untyped", "Throttling duration due to thermal constraints (in us)."),
    "DCGM_FI_DEV_SYNC_BOOST_VIOLATION": (
        "untyped",
        "Throttling duration due to sync-boost constraints (in us).",
    ),
    "DCGM_FI_DEV_BOARD_LIMIT_VIOLATION": (
        "untyped",
        "Throttling duration due to board limit constraints (in us).",
    ),
    "DCGM_FI_DEV_LOW_UTIL_VIOLATION": ("untyped", "Throttling duration due to low utilization (in us)."),
    "DCGM_FI_DEV_RELIABILITY_VIOLATION": (
        "untyped",
        "Throttling duration due to reliability constraints (in us).",
    ),
    "DCGM_FI_DEV_FB_FREE": ("gauge", "Framebuffer memory free (in MiB)."),
    "DCGM_FI_DEV_FB_USED": ("gauge", "Framebuffer memory used (in MiB)."),
    "DCGM_FI_DEV_FB_RESERVED": ("gauge", "Framebuffer memory reserved (in MiB)."),
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": ("untyped", "Total number of single-bit volatile ECC errors."),
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": ("untyped", "Total number of double-bit volatile ECC errors."),
    "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL": ("untyped", "Total number of single-bit persistent ECC errors."),
    "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL": ("untyped", "Total number of double-bit persistent ECC errors."),
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL": (
        "untyped",
        "Total number of NVLink bandwidth counters for all lanes",
    ),
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": (
        "untyped",
        "Number of remapped rows for uncorrectable errors",
    ),
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": ("untyped", "Number of remapped rows for correctable errors"),
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": ("gauge", "Whether remapping of rows has failed"),
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": ("gauge", "Ratio of time the graphics engine is active."),
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": ("gauge", "Ratio of cycles the tensor (HMMA) pipe is active."),
    "DCGM_FI_PROF_DRAM_ACTIVE": (
        "gauge",
        "Ratio of cycles the device memory interface is active sending or receiving data.",
    ),
}
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
# Reasons that mean the GPU runs slower than it could while busy (used by the manifest's checks).
THROTTLE_REASONS = frozenset(
    {"sw_power_cap", "hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"}
)


class GpuCollector:
    """Reads every GPU through NVML on each scrape; a lost GPU loses only its own series."""

    name = "gpu"

    def __init__(
        self,
        session: NvmlSession,
        *,
        sampler: GpuSampler | None = None,
        hostname: str | None = None,
        name_of_pid: Callable[[int], str] = process_name,
    ) -> None:
        self.session = session
        self.sampler = sampler
        self.hostname = hostname or socket.gethostname()
        self.name_of_pid = name_of_pid
        self._identities: dict[int, GpuIdentity] = {}
        self._topology: list[list[str]] | None = None

    def scrape(self) -> tuple[list[Metric], bool]:
        """All GPUs' families and True when every GPU answered."""
        nvml = self.session.get()
        with self.session.turn:
            return self._scrape(nvml)

    def _scrape(self, nvml: Any) -> tuple[list[Metric], bool]:
        count = int(nvml.nvmlDeviceGetCount())
        driver = text(try_call(nvml, "nvmlSystemGetDriverVersion") or "")
        out = Families()
        all_ok = True
        handles: dict[int, Any] = {}
        for index in range(count):
            try:
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
                identity = self._identity(nvml, handle, index, driver)
                self._emit_gpu(nvml, handle, identity, out)
                handles[index] = handle
                up = 1.0
            except Exception:  # DeviceLost or a handle that cannot be had: drop this GPU only
                self._identities.pop(index, None)
                all_ok, up = False, 0.0
            out.add(
                "infergauge_gpu_up",
                "gauge",
                "1 when the GPU answered NVML on this scrape.",
                {"gpu": str(index), "Hostname": self.hostname},
                up,
            )
        if all_ok:
            self._emit_topology(nvml, handles, out)
        return out.metrics(), all_ok

    def _identity(self, nvml: Any, handle: Any, index: int, driver: str) -> GpuIdentity:
        identity = self._identities.get(index)
        if identity is None:
            identity = read_identity(nvml, handle, index, driver)
            if not identity.uuid:
                raise DeviceLost(f"gpu {index} has no UUID")
            self._identities[index] = identity
        return identity

    def _emit_gpu(self, nvml: Any, handle: Any, identity: GpuIdentity, out: Families) -> None:
        labels = identity.labels(self.hostname)
        fields = read_fields(nvml, handle)
        samples = self.sampler.snapshot(identity.index) if self.sampler else None
        if samples is not None:
            fields.update(samples.gpm)
            fields["DCGM_FI_DEV_XID_ERRORS"] = float(samples.last_xid)
        if samples is not None and samples.slow is not None:
            fields.update(samples.slow)
        elif self.sampler is None or not self.sampler.running:  # nobody samples: read them now
            fields.update(read_slow_fields(nvml, handle))
        # else: the running sampler has not reached this GPU yet; its slow fields appear shortly
        for name, (typ, doc) in DCGM_FIELDS.items():
            if name in fields:
                out.add(name, typ, doc, labels, fields[name])
        labels = identity.own_labels(self.hostname)
        self._emit_peaks(fields, samples, labels, out)
        if "infergauge_power_limit_w" in fields:
            out.add(
                "infergauge_gpu_power_limit_watts",
                "gauge",
                "Enforced power limit (the cap power draw meets).",
                labels,
                fields["infergauge_power_limit_w"],
            )
        if "infergauge_max_sm_clock_mhz" in fields:
            out.add(
                "infergauge_gpu_sm_clock_max_hertz",
                "gauge",
                "Highest SM clock the GPU supports.",
                labels,
                fields["infergauge_max_sm_clock_mhz"] * 1e6,
            )
        reasons = read_clock_event_reasons(nvml, handle)
        if reasons is not None:
            for bit, reason in CLOCK_EVENT_REASONS.items():
                out.add(
                    "infergauge_gpu_clock_event_active",
                    "gauge",
                    "1 while this clocks-event (throttle) reason is active.",
                    {**labels, "reason": reason},
                    1.0 if int(reasons) & bit else 0.0,
                )
        for pid, used in read_processes(nvml, handle):
            if used is not None:
                out.add(
                    "infergauge_gpu_process_memory_bytes",
                    "gauge",
                    "GPU memory used by a process.",
                    {**labels, "pid": str(pid), "process": self.name_of_pid(pid)},
                    used,
                )

    @staticmethod
    def _emit_peaks(fields: dict[str, float], samples: Any, labels: dict[str, str], out: Families) -> None:
        power = [v for v in (fields.get("DCGM_FI_DEV_POWER_USAGE"), samples and samples.power_peak_w) if v]
        util = [
            v
            for v in (fields.get("DCGM_FI_DEV_GPU_UTIL"), samples and samples.util_peak_percent)
            if v is not None
        ]
        if power:
            out.add(
                "infergauge_gpu_power_usage_peak_watts",
                "gauge",
                "Highest power draw sampled since the previous scrape.",
                labels,
                max(power),
            )
        if util:
            out.add(
                "infergauge_gpu_utilization_peak_ratio",
                "gauge",
                "Highest GPU utilization (0-1) sampled since the previous scrape.",
                labels,
                max(util) / 100.0,
            )

    def _emit_topology(self, nvml: Any, handles: dict[int, Any], out: Families) -> None:
        indices = sorted(handles)
        if self._topology is None or len(self._topology) != len(indices):
            bus_ids = [self._identities[i].pci_bus_id for i in indices]
            self._topology = read_matrix(nvml, [handles[i] for i in indices], bus_ids)
        for row, gpu in enumerate(indices):
            for col, peer in enumerate(indices):
                if gpu != peer:
                    out.add(
                        "infergauge_gpu_topology_info",
                        "gauge",
                        "Path between two GPUs as nvidia-smi topo names it (NV<n>, PIX, PXB, PHB, NODE, SYS)",
                        {
                            "gpu": str(gpu),
                            "peer": str(peer),
                            "link": self._topology[row][col],
                            "Hostname": self.hostname,
                        },
                        1.0,
                    )
