"""dcgm-exporter's default fields: name -> (Prometheus type, help), from its etc/default-counters.csv."""

from __future__ import annotations

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
