"""GPU-to-GPU paths as `nvidia-smi topo -m` names them: NV<n> (NVLink links), PIX, PXB, PHB, NODE, SYS."""

from __future__ import annotations

from typing import Any

from exporter.nvml.session import text, try_call

NVML_P2P_CAPS_INDEX_NVLINK = 2
NVML_P2P_STATUS_OK = 0
NVML_NVLINK_MAX_LINKS = 18
# nvmlGpuTopologyLevel_t -> nvidia-smi topo's abbreviation.
TOPOLOGY_LEVELS = {0: "X", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}


def nvlink_lanes(nvml: Any, handle: Any, peer_bus_id: str) -> int:
    """Active NVLink links from `handle` to the GPU at `peer_bus_id`; through an NVSwitch (the remote
    end is the switch), all of its active links, which is what `nvidia-smi topo -m` prints too."""
    lanes = active = 0
    for link in range(int(getattr(nvml, "NVML_NVLINK_MAX_LINKS", NVML_NVLINK_MAX_LINKS))):
        state = try_call(nvml, "nvmlDeviceGetNvLinkState", handle, link)
        if state is None:
            break  # unsupported or past the last link
        if not state:
            continue
        active += 1
        remote = try_call(nvml, "nvmlDeviceGetNvLinkRemotePciInfo", handle, link)
        if remote is not None and text(remote.busId).lower() == peer_bus_id.lower():
            lanes += 1
    return lanes or active


def link_between(nvml: Any, a: Any, b: Any, b_bus_id: str) -> str:
    """'NV<lanes>' when the pair talks over NVLink, else the PCIe topology level (PIX ... SYS)."""
    status = try_call(nvml, "nvmlDeviceGetP2PStatus", a, b, NVML_P2P_CAPS_INDEX_NVLINK)
    if status == NVML_P2P_STATUS_OK:
        return f"NV{nvlink_lanes(nvml, a, b_bus_id)}"
    level = try_call(nvml, "nvmlDeviceGetTopologyCommonAncestor", a, b)
    return TOPOLOGY_LEVELS.get(int(level), "SYS") if level is not None else "unknown"


def read_matrix(nvml: Any, handles: list[Any], bus_ids: list[str]) -> list[list[str]]:
    """The full matrix (row i, column j), 'X' on the diagonal."""
    size = len(handles)
    return [
        ["X" if i == j else link_between(nvml, handles[i], handles[j], bus_ids[j]) for j in range(size)]
        for i in range(size)
    ]


def interconnect(matrix: list[list[str]]) -> str:
    """'single' (one GPU), 'nvlink' (every pair over NVLink) or 'pcie' (any pair without it)."""
    if len(matrix) <= 1:
        return "single"
    pairs = [cell for i, row in enumerate(matrix) for j, cell in enumerate(row) if i != j]
    return "nvlink" if all(cell.startswith("NV") for cell in pairs) else "pcie"
