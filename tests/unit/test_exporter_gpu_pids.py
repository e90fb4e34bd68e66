"""`gpu_pids`: an engine's GPU processes are its process tree intersected with NVML's process list
(issue 13 item 6), on the real engines' ps.txt and nvidia-smi captures, with the fake NVML."""

from __future__ import annotations

from pathlib import Path

from exporter.collectors.engine import EngineCollector
from exporter.collectors.gpu import GpuCollector
from exporter.discovery import ProcInfo, find_engines, gpu_holders, parse_ps
from exporter.engine_http import EngineHttpFacts
from exporter.engines import EngineInspector
from exporter.manifest import ManifestBuilder
from exporter.nvml.fake import FakeGpu, FakeNvml
from exporter.nvml.sampler import GpuSampler
from exporter.nvml.session import NvmlSession
from tests.conftest import GOLDEN_SGLANG, GOLDEN_VLLM

SCHEDULER = 1325  # sglang::scheduler in the golden ps.txt
FOREIGN = 4242  # another user's job on the same GPU


def nvidia_smi_pids(folder: Path) -> set[int]:
    """Pids of `nvidia-smi --query-compute-apps=pid,process_name,used_memory` (the golden CSV)."""
    lines = (folder / "nvidia_smi_apps.csv").read_text().splitlines()[1:]
    return {int(line.split(",")[0]) for line in lines if line.strip()}


def sglang_warming_up() -> list[ProcInfo]:
    """The golden SGLang tree plus 12 JIT compiler subprocesses under its scheduler (as seen in warm-up)."""
    procs = parse_ps((GOLDEN_SGLANG / "ps.txt").read_text())
    compilers = [
        ProcInfo(5000 + i, SCHEDULER, ("/usr/bin/gcc", "-O3", "-shared", f"k{i}.c")) for i in range(11)
    ]
    nvcc = ProcInfo(5100, 5000, ("/usr/local/cuda/bin/nvcc", "-c", "kernel.cu"))  # a grandchild
    return [*procs, *compilers, nvcc]


def test_jit_compilers_are_children_but_not_gpu_processes() -> None:
    (engine,) = find_engines(sglang_warming_up())
    assert {5000, 5100, SCHEDULER} <= set(engine.children)  # the whole tree is the engine's ...
    gpu = nvidia_smi_pids(GOLDEN_SGLANG)
    assert gpu_holders(engine, gpu) == [SCHEDULER]  # ... but only the scheduler holds GPU memory


def test_vllm_engine_core_is_its_gpu_process() -> None:
    (engine,) = find_engines(parse_ps((GOLDEN_VLLM / "ps.txt").read_text()))
    assert gpu_holders(engine, nvidia_smi_pids(GOLDEN_VLLM)) == sorted(nvidia_smi_pids(GOLDEN_VLLM))


def test_a_gpu_process_outside_the_tree_is_not_the_engines() -> None:
    (engine,) = find_engines(sglang_warming_up())
    assert gpu_holders(engine, {SCHEDULER, FOREIGN}) == [SCHEDULER]


def test_without_nvml_process_list_the_titled_workers() -> None:
    (engine,) = find_engines(sglang_warming_up())
    titled = gpu_holders(engine, None)  # e.g. --no-collector gpu beside dcgm-exporter
    assert SCHEDULER in titled
    assert not {5000, 5100} & set(titled)


def test_manifest_gpu_pids_from_the_fake_nvml_process_list() -> None:
    procs = sglang_warming_up()
    inspector = EngineInspector(
        read_procs=lambda: procs,
        ports_of=lambda pid: [],
        read_env=lambda pid: {},
        ask_interpreter=lambda pid, engine: None,
        poll=lambda url, timeout, key: EngineHttpFacts(url=url, up=True, ready=True, version="0.5.14"),
    )
    used = 72830 * 2**20  # golden nvidia_smi_apps.csv
    session = NvmlSession(FakeNvml([FakeGpu(0, processes=[(SCHEDULER, used), (FOREIGN, 2**30)])]))
    gpu = GpuCollector(session, sampler=GpuSampler(session, 0), hostname="h")
    manifest = ManifestBuilder([gpu, EngineCollector(inspector)], host=dict).build()
    (engine,) = manifest["engines"]
    assert engine["gpu_pids"] == [SCHEDULER]
    foreign = [c["message"] for c in manifest["checks"] if c["id"] == "foreign_gpu_processes"]
    assert len(foreign) == 1
    assert str(FOREIGN) in foreign[0]
    assert str(SCHEDULER) not in foreign[0]
