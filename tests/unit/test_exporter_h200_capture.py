"""The scrape and manifest captured on a real H200 (tests/fixtures/exporter/capture.sh) make sense
and agree with `nvidia-smi -q` taken on the same machine a few seconds later."""

from __future__ import annotations

import json
import re

from exporter.sanity import samples_by_gpu, scrape_problems
from tests.conftest import FIXTURES

CAPTURE = FIXTURES / "exporter"


def smi_field(text: str, name: str) -> str:
    match = re.search(rf"^\s*{re.escape(name)}\s*:\s*(.+?)\s*$", text, flags=re.M)
    assert match, name
    return match.group(1)


def smi_section(text: str, section: str) -> str:
    start = text.index(f"    {section}\n")
    end = text.index("\n    ", start + len(section) + 6)
    block_end = re.search(r"\n    \S", text[end:])
    return text[start : end + (block_end.start() if block_end else 0)]


def test_capture_under_load_passes_the_sanity_checks() -> None:
    metrics = (CAPTURE / "h200-metrics.txt").read_text()
    manifest = json.loads((CAPTURE / "h200-manifest.json").read_text())
    assert scrape_problems(metrics, manifest) == []


def test_idle_capture_is_idle() -> None:
    values = samples_by_gpu((CAPTURE / "h200-metrics-idle.txt").read_text())["0"]
    assert values["DCGM_FI_DEV_GPU_UTIL"] == 0
    assert 'reason="gpu_idle"} 1.0' in (CAPTURE / "h200-metrics-idle.txt").read_text()


def test_manifest_agrees_with_nvidia_smi() -> None:
    smi = (CAPTURE / "h200-nvidia-smi.txt").read_text()
    gpu = json.loads((CAPTURE / "h200-manifest.json").read_text())["gpus"][0]
    assert gpu["name"] == smi_field(smi, "Product Name")
    assert gpu["uuid"] == smi_field(smi, "GPU UUID")
    assert gpu["pci_bus_id"] == smi_field(smi, "Bus Id")
    assert gpu["driver_version"] == smi_field(smi, "Driver Version")
    assert gpu["cuda_version"] == smi_field(smi, "CUDA Version")
    assert gpu["persistence_mode"] is (smi_field(smi, "Persistence Mode") == "Enabled")
    fb = smi_section(smi, "FB Memory Usage")
    assert gpu["memory_total_bytes"] == int(smi_field(fb, "Total").split()[0]) * 2**20
    assert gpu["power_limit_w"] == float(smi_field(smi, "Current Power Limit").split()[0])
    max_clocks = smi_section(smi, "Max Clocks")
    assert gpu["clocks"]["max_sm_mhz"] == int(smi_field(max_clocks, "SM").split()[0])


def test_load_shows_in_utilization_power_and_tensor_activity() -> None:
    load = samples_by_gpu((CAPTURE / "h200-metrics.txt").read_text())["0"]
    idle = samples_by_gpu((CAPTURE / "h200-metrics-idle.txt").read_text())["0"]
    # the bf16 matmul load: busy, drawing more power than idle, tensor pipes active most of the time
    assert load["DCGM_FI_DEV_GPU_UTIL"] > idle["DCGM_FI_DEV_GPU_UTIL"]
    assert load["DCGM_FI_DEV_POWER_USAGE"] > 2 * idle["DCGM_FI_DEV_POWER_USAGE"]
    assert 0.5 < load["DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"] <= 1.0
    assert load["infergauge_gpu_power_usage_peak_watts"] >= load["DCGM_FI_DEV_POWER_USAGE"]
    # the load process holds what FB_USED shows, within the driver's own overhead
    process_bytes = load["infergauge_gpu_process_memory_bytes"]
    assert 0 < load["DCGM_FI_DEV_FB_USED"] * 2**20 - process_bytes < 512 * 2**20


def test_power_violation_counter_is_in_microseconds_like_nvidia_smi() -> None:
    # nvidia-smi -q ran ~10 s after the scrape, during the same power-capped load; its counter is
    # in microseconds. Same unit: it is ahead by at most the seconds between the two readings.
    smi = (CAPTURE / "h200-nvidia-smi.txt").read_text()
    smi_us = int(smi_field(smi, "SW Power Capping").split()[0])
    scraped_us = samples_by_gpu((CAPTURE / "h200-metrics.txt").read_text())["0"][
        "DCGM_FI_DEV_POWER_VIOLATION"
    ]
    assert scraped_us > 1e6  # more than a second of capping after 15 s of load
    assert 0 <= smi_us - scraped_us <= 60e6


def topo_matrix(text: str) -> list[list[str]]:
    """The GPU-by-GPU block of `nvidia-smi topo -m`."""
    rows = [line.split("\t") for line in text.splitlines() if re.match(r"^GPU\d+\t", line)]
    return [[cell.strip() for cell in row[1 : len(rows) + 1]] for row in rows]


def test_two_gpu_topology_matches_nvidia_smi_topo() -> None:
    manifest = json.loads((CAPTURE / "h200x2-manifest.json").read_text())
    expected = topo_matrix((CAPTURE / "h200x2-topo.txt").read_text())
    assert len(expected) == 2
    assert manifest["topology"]["matrix"] == expected
    assert manifest["topology"]["interconnect"] == ("nvlink" if expected[0][1].startswith("NV") else "pcie")
    metrics = (CAPTURE / "h200x2-metrics.txt").read_text()
    assert (
        f'infergauge_gpu_topology_info{{Hostname="vm",gpu="0",link="{expected[0][1]}",peer="1"}} 1.0'
        in metrics
    )
    assert scrape_problems(metrics, manifest) == []
