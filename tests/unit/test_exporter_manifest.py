"""The /manifest document (docs/CONTRACTS.md schema) and its checks, from a fake NVML and fake engines."""

from __future__ import annotations

from typing import Any

from exporter.checks import engine_checks, gpu_checks
from exporter.collectors.base import Collector
from exporter.collectors.engine import EngineCollector
from exporter.collectors.gpu import GpuCollector
from exporter.discovery import ProcInfo
from exporter.engine_http import EngineHttpFacts
from exporter.engines import EngineInspector
from exporter.manifest import ManifestBuilder
from exporter.nvml.fake import DRIVER_NOT_LOADED, FakeGpu, FakeNvml
from exporter.nvml.sampler import GpuSampler
from exporter.nvml.session import NvmlSession
from tests.conftest import GOLDEN_VLLM

HOST = {
    "hostname": "h",
    "cpu_model": "cpu",
    "cpu_count": 2,
    "memory_bytes": 1,
    "os": "os",
    "kernel": "k",
    "python": "3.11",
}


def vllm_inspector(up: bool = True, urls: list[str] | None = None) -> EngineInspector:
    argv = tuple((GOLDEN_VLLM / "command.txt").read_text().split())
    return EngineInspector(
        urls,
        read_procs=lambda: [ProcInfo(613, 1, argv), ProcInfo(736, 613, ("VLLM::EngineCore",))],
        ports_of=lambda pid: [],
        read_env=lambda pid: {"CUDA_VISIBLE_DEVICES": "0", "VLLM_API_KEY": "secret"},
        ask_interpreter=lambda pid, engine: None,
        poll=lambda url, timeout, key: EngineHttpFacts(
            url=url, up=up, version="0.26.0" if up else None, model="tiny-llama", max_model_len=2048
        ),
    )


def build(nvml: FakeNvml, inspector: EngineInspector | None) -> dict[str, Any]:
    session = NvmlSession(nvml)
    collectors: list[Collector] = [GpuCollector(session, sampler=GpuSampler(session, 0), hostname="h")]
    if inspector is not None:
        collectors.append(EngineCollector(inspector))
    return ManifestBuilder(collectors, host=lambda: HOST).build()


def test_manifest_schema_and_engine_from_parent_of_gpu_process() -> None:
    nvml = FakeNvml([FakeGpu(0, processes=[(736, 2**30)])])
    manifest = build(nvml, vllm_inspector())
    assert set(manifest) == {"collected_at", "host", "gpus", "topology", "engines", "checks"}
    gpu = manifest["gpus"][0]
    for key in (
        "index",
        "name",
        "uuid",
        "pci_bus_id",
        "memory_total_bytes",
        "driver_version",
        "cuda_version",
        "persistence_mode",
        "clocks",
        "clock_locks",
        "power_limit_w",
    ):
        assert key in gpu, key
    assert gpu["memory_total_bytes"] == 143771 * 2**20
    assert gpu["cuda_version"] == "13.0"
    assert gpu["power_limit_w"] == 700.0
    assert manifest["topology"] == {"matrix": [["X"]], "interconnect": "single"}
    engine = manifest["engines"][0]
    assert engine["engine"] == "vllm"
    assert engine["version"] == "0.26.0"
    assert engine["pid"] == 613
    assert engine["gpu_pids"] == [736]
    assert engine["params"]["max_num_seqs"] == 1024  # filled from the H200's memory
    assert engine["env"]["VLLM_API_KEY"] == "<redacted>"
    ids = {c["id"] for c in manifest["checks"]}
    # the GPU's only process is the engine's child: not foreign
    assert "foreign_gpu_processes" not in ids
    assert "clocks_not_locked" in ids


def test_checks_find_throttling_foreign_processes_and_memory_errors() -> None:
    gpus = [
        {
            "index": 0,
            "name": "H200",
            "clock_event_reasons": ["hw_thermal_slowdown"],
            "processes": [{"pid": 1, "process": "engine"}, {"pid": 2, "process": "leftover"}],
            "errors": {"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": 2.0},
            "xid": 79,
            "clock_locks": {"locked": True},
            "persistence_mode": False,
        }
    ]
    found = {c["id"]: c["severity"] for c in gpu_checks(gpus, {1})}
    assert found == {
        "gpu_throttling": "error",
        "foreign_gpu_processes": "warning",
        "gpu_memory_errors": "error",
        "gpu_xid": "error",
        "persistence_mode_off": "warning",
    }


def test_configured_engine_down_is_an_error() -> None:
    engines = [
        {"engine": "vllm", "url": "http://127.0.0.1:8000", "up": False, "version": None},
        {"engine": "sglang", "url": "http://127.0.0.1:30000", "up": True, "version": None},
    ]
    found = [(c["id"], c["severity"]) for c in engine_checks(engines, ["http://127.0.0.1:8000"])]
    # a down engine cannot tell its version: only the one that answers gets the version warning
    assert found == [("engine_down", "error"), ("engine_version_unknown", "warning")]


def test_no_nvml_still_gives_host_engines_and_a_check() -> None:
    manifest = build(FakeNvml(1, init_error=DRIVER_NOT_LOADED), vllm_inspector())
    assert manifest["gpus"] == []
    assert manifest["host"] == HOST
    assert manifest["engines"][0]["engine"] == "vllm"
    assert any(c["id"] == "gpu_unavailable" for c in manifest["checks"])


def test_lost_gpu_is_reported_and_others_listed() -> None:
    manifest = build(FakeNvml(2, lost={0}), None)
    assert [g["index"] for g in manifest["gpus"]] == [1]
    assert any(c["id"] == "gpu_unavailable" and c["severity"] == "error" for c in manifest["checks"])
