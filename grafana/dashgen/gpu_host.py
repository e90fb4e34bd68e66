"""GPU host: dcgm-exporter names (works with the infergauge exporter or NVIDIA dcgm-exporter)."""

from __future__ import annotations

from .board import dashboard, multi_var
from .common import info_table, organize, series
from .panels import Json, row, targets, timeseries

G = 'Hostname=~"$Hostname", gpu=~"$gpu"'
LEGEND = "GPU {{gpu}} {{Hostname}}"
GPU_LABELS = "Hostname, gpu, modelName, UUID, pci_bus_id, DCGM_FI_DRIVER_VERSION"


def _series(title: str, expr: str, unit: str, desc: str = "", w: int = 8) -> Json:
    return series(title, expr, LEGEND, unit, desc=desc, w=w)


def _gpu_panels() -> list[Json]:
    return [
        row("Load"),
        _series(
            "GPU utilization",
            f"DCGM_FI_DEV_GPU_UTIL{{{G}}}",
            "percent",
            "Share of time a kernel ran (not how busy the SMs were).",
        ),
        _series("Memory copy utilization", f"DCGM_FI_DEV_MEM_COPY_UTIL{{{G}}}", "percent"),
        _series("Memory used", f"DCGM_FI_DEV_FB_USED{{{G}}}", "mbytes"),
        _series(
            "Memory used share",
            f"DCGM_FI_DEV_FB_USED{{{G}}} / (DCGM_FI_DEV_FB_USED{{{G}}} + DCGM_FI_DEV_FB_FREE{{{G}}})",
            "percentunit",
        ),
        row("Power, heat and clocks"),
        _series("Power draw", f"DCGM_FI_DEV_POWER_USAGE{{{G}}}", "watt"),
        _series(
            "Energy rate",
            f"rate(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{{G}}}[$__rate_interval]) / 1000",
            "watt",
            "Average power from the energy counter (mJ): cost per token comes from this.",
        ),
        timeseries(
            "Temperature",
            targets(
                (f"DCGM_FI_DEV_GPU_TEMP{{{G}}}", "GPU {{gpu}} core"),
                (f"DCGM_FI_DEV_MEMORY_TEMP{{{G}}}", "GPU {{gpu}} memory"),
            ),
            "celsius",
            w=8,
        ),
        _series("SM clock", f"DCGM_FI_DEV_SM_CLOCK{{{G}}} * 1e6", "hertz"),
        _series("Memory clock", f"DCGM_FI_DEV_MEM_CLOCK{{{G}}} * 1e6", "hertz"),
        series(
            "Clock event (throttle) reasons",
            f"max by (Hostname, gpu, reason) (infergauge_gpu_clock_event_active{{{G}}})",
            "GPU {{gpu}} {{reason}}",
            "bool_on_off",
            w=8,
            desc="Thermal or power reasons active under load make runs incomparable.",
        ),
        row("Errors and processes"),
        _series(
            "PCIe replays", f"increase(DCGM_FI_DEV_PCIE_REPLAY_COUNTER{{{G}}}[$__rate_interval])", "short"
        ),
        _series(
            "Last XID error", f"DCGM_FI_DEV_XID_ERRORS{{{G}}}", "short", "0 = none since the driver loaded."
        ),
        series(
            "GPU memory per process",
            f"max by (Hostname, gpu, pid, process) (infergauge_gpu_process_memory_bytes{{{G}}})",
            "GPU {{gpu}} {{process}} ({{pid}})",
            "bytes",
            w=8,
            desc="Anything besides the engine here is a foreign process competing for the GPU.",
        ),
    ]


def _inventory_panels() -> list[Json]:
    hidden = organize({"Time": True, "Value": True, "__name__": True})
    return [
        row("Inventory"),
        info_table(
            "GPUs",
            f"max by ({GPU_LABELS}) (DCGM_FI_DEV_GPU_TEMP{{{G}}})",
            transformations=hidden,
            w=12,
            h=8,
        ),
        info_table(
            "Interconnect (topology)",
            'max by (gpu, peer, link) (infergauge_gpu_topology_info{Hostname=~"$Hostname"})',
            transformations=hidden,
            w=12,
            h=8,
        ),
        info_table(
            "Engines on this host",
            "max without (job, __name__) (infergauge_engine_info)",
            transformations=hidden,
            w=24,
            h=6,
        ),
        info_table(
            "Host",
            "max without (job, __name__) (infergauge_host_info)",
            transformations=hidden,
            w=12,
            h=5,
        ),
        series(
            "Exporter collectors",
            "min by (instance, collector) (infergauge_collector_success)",
            "ok {{collector}} {{instance}}",
            "bool_yes_no",
            w=12,
            h=5,
        ),
    ]


def build() -> Json:
    """The GPU host dashboard."""
    variables = [
        multi_var("Hostname", "Host", "label_values(DCGM_FI_DEV_GPU_UTIL, Hostname)"),
        multi_var(
            "gpu",
            "GPU",
            'label_values(DCGM_FI_DEV_GPU_UTIL{Hostname=~"$Hostname"}, gpu)',
            sort=3,
        ),
    ]
    return dashboard(
        "infergauge-gpu-host",
        "GPU host",
        [*_gpu_panels(), *_inventory_panels()],
        desc="The benchmark host's GPUs under dcgm-exporter's metric names, plus what dcgm-exporter lacks: "
        "clock event reasons, per-process memory, topology, engine and host facts.",
        variables=variables,
        time_from="now-1h",
        refresh="10s",
        tags=("gpu",),
    )
