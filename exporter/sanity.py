"""Do a scrape and a manifest taken on a real GPU make physical sense? Returns the problems found.

Used by the `gpu`-marked test (wherever NVML exists) and on the committed H200 capture.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

REASONS = 9


def samples_by_gpu(metrics_text: str) -> dict[str, dict[str, float]]:
    """{gpu index: {metric name: value}} for series with a `gpu` label (first sample per name)."""
    out: dict[str, dict[str, float]] = defaultdict(dict)
    for family in text_string_to_metric_families(metrics_text):
        for sample in family.samples:
            gpu = sample.labels.get("gpu")
            if gpu is not None and "peer" not in sample.labels:
                out[gpu].setdefault(sample.name, sample.value)
    return dict(out)


def _gpu_problems(gpu: dict[str, Any], values: dict[str, float]) -> list[str]:
    tag = f"gpu {gpu['index']}"
    problems: list[str] = []
    total_mib = (gpu.get("memory_total_bytes") or 0) / 2**20
    fb = sum(
        values.get(k, 0.0) for k in ("DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_RESERVED")
    )
    if total_mib <= 0 or abs(fb - total_mib) > 0.02 * total_mib:
        problems.append(f"{tag}: FB used+free+reserved {fb:.0f} MiB vs total {total_mib:.0f} MiB")
    power, limit = values.get("DCGM_FI_DEV_POWER_USAGE"), gpu.get("power_limit_w")
    if power is None or limit is None or not 0 < power <= limit * 1.2:
        problems.append(f"{tag}: power {power} W outside (0, 1.2 x limit {limit} W]")
    sm, max_sm = values.get("DCGM_FI_DEV_SM_CLOCK"), gpu.get("clocks", {}).get("max_sm_mhz")
    if sm is None or max_sm is None or not 0 < sm <= max_sm:
        problems.append(f"{tag}: SM clock {sm} MHz outside (0, max {max_sm} MHz]")
    temp = values.get("DCGM_FI_DEV_GPU_TEMP")
    if temp is None or not 5 <= temp <= 110:
        problems.append(f"{tag}: GPU temperature {temp} C implausible")
    if not str(gpu.get("uuid", "")).startswith("GPU-"):
        problems.append(f"{tag}: UUID {gpu.get('uuid')!r} is not an NVIDIA GPU UUID")
    return problems


def scrape_problems(metrics_text: str, manifest: dict[str, Any]) -> list[str]:
    """Every inconsistency between a real scrape, its manifest and physics; [] when all is well."""
    problems: list[str] = []
    if 'infergauge_collector_success{collector="gpu"} 1.0' not in metrics_text:
        problems.append("gpu collector did not succeed")
    gpus = manifest.get("gpus", [])
    by_gpu = samples_by_gpu(metrics_text)
    late = [gpu for gpu, values in by_gpu.items() if values.get("infergauge_gpu_read_success") == 0]
    if late:
        problems.append(f"gpu {', '.join(sorted(late))}: NVML did not answer within the scrape deadline")
    if not gpus:
        problems.append("manifest lists no GPU")
    for gpu in gpus:
        problems += _gpu_problems(gpu, by_gpu.get(str(gpu["index"]), {}))
        reasons = len(
            re.findall(rf'infergauge_gpu_clock_event_active{{[^}}]*gpu="{gpu["index"]}"', metrics_text)
        )
        if reasons != REASONS:
            problems.append(f"gpu {gpu['index']}: {reasons} clock-event reason series, expected {REASONS}")
        if not re.fullmatch(r"\d+\.\d+", str(gpu.get("cuda_version"))) or not gpu.get("driver_version"):
            problems.append(f"gpu {gpu['index']}: driver/CUDA version missing")
    topology = manifest.get("topology", {})
    expected = "single" if len(gpus) == 1 else None
    if len(topology.get("matrix", [])) != len(gpus) or (
        expected and topology.get("interconnect") != expected
    ):
        problems.append(f"topology {topology} does not match {len(gpus)} GPU(s)")
    return problems
