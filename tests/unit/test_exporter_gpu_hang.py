"""Issue 13 item 3: one hung GPU (fake NVML calls that block) stalls no scrape, sampler pass or manifest."""

from __future__ import annotations

import time

from prometheus_client import CollectorRegistry

from exporter.collectors.base import CollectorSet
from exporter.collectors.gpu import GpuCollector
from exporter.manifest import ManifestBuilder
from exporter.nvml.fake import FakeNvml
from exporter.nvml.reading import DEFAULT_TIMEOUT_S
from exporter.nvml.sampler import GpuSampler
from exporter.nvml.session import NvmlSession

HANG_S = 2.0


def status(registry: CollectorRegistry, name: str, gpu: int) -> float | None:
    return registry.get_sample_value(name, {"gpu": str(gpu), "Hostname": "h"})


def temp(registry: CollectorRegistry, gpu: int) -> float | None:
    for family in registry.collect():
        for sample in family.samples:
            if sample.name == "DCGM_FI_DEV_GPU_TEMP" and sample.labels["gpu"] == str(gpu):
                return sample.value
    return None


def timed_scrape(registry: CollectorRegistry) -> float:
    started = time.perf_counter()
    registry.get_sample_value("infergauge_gpus", {"Hostname": "h"})  # one full collect()
    return time.perf_counter() - started


def test_one_hung_gpu_does_not_stall_the_scrape_and_is_marked() -> None:
    nvml = FakeNvml(2)
    session = NvmlSession(nvml)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(CollectorSet([GpuCollector(session, hostname="h")]))
    assert status(registry, "infergauge_gpu_read_success", 1) == 1  # both healthy: last good values kept
    nvml.hang(1, HANG_S)
    nvml.gpus[0].temp_c = 55  # GPU 0 changes while GPU 1 hangs: a fresh read must show it
    nvml.gpus[1].temp_c = 77  # ...and GPU 1's change must not appear (it cannot be read)
    elapsed = timed_scrape(registry)
    assert elapsed < 0.8  # the 2 s hang is not waited for: the deadline is DEFAULT_TIMEOUT_S
    assert elapsed >= DEFAULT_TIMEOUT_S * 0.9  # this first scrape did wait for GPU 1, up to the deadline
    assert status(registry, "infergauge_gpu_read_success", 0) == 1
    assert status(registry, "infergauge_gpu_read_success", 1) == 0
    assert temp(registry, 0) == 55
    assert temp(registry, 1) == 39  # the last good value, served with its age
    assert status(registry, "infergauge_gpu_read_age_seconds", 1) >= DEFAULT_TIMEOUT_S * 0.9
    assert status(registry, "infergauge_gpu_read_age_seconds", 0) < DEFAULT_TIMEOUT_S
    assert status(registry, "infergauge_gpu_up", 1) == 1  # hung, not lost
    assert registry.get_sample_value("infergauge_collector_success", {"collector": "gpu"}) == 0
    # later scrapes do not wait again for a GPU known to be late
    assert max(timed_scrape(registry) for _ in range(5)) < DEFAULT_TIMEOUT_S * 0.5
    time.sleep(HANG_S)  # the hang ends: the late read lands, then GPU 1 is read fresh again
    deadline = time.monotonic() + 5 * HANG_S
    while status(registry, "infergauge_gpu_read_success", 1) != 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert temp(registry, 1) == 77
    assert registry.get_sample_value("infergauge_collector_success", {"collector": "gpu"}) == 1


def test_a_gpu_hung_from_the_start_has_no_values_only_its_status() -> None:
    nvml = FakeNvml(2)
    nvml.hang(0, HANG_S)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(CollectorSet([GpuCollector(NvmlSession(nvml), hostname="h")]))
    assert timed_scrape(registry) < 0.8
    assert status(registry, "infergauge_gpu_up", 0) == 0  # never answered: nothing to serve
    assert status(registry, "infergauge_gpu_read_age_seconds", 0) is None
    assert temp(registry, 0) is None
    assert temp(registry, 1) == 39


def test_sampler_pass_is_bounded_and_samples_the_other_gpus() -> None:
    nvml = FakeNvml(2)
    session = NvmlSession(nvml)
    sampler = GpuSampler(session, interval_s=0)
    nvml.hang(1, HANG_S)
    nvml.gpus[0].power_mw = 650_000
    started = time.perf_counter()
    sampler.tick()
    assert time.perf_counter() - started < 0.8
    assert sampler.snapshot(0).power_peak_w == 650.0
    assert sampler.snapshot(1).power_peak_w is None


def test_manifest_leaves_out_a_hung_gpu_and_says_so() -> None:
    nvml = FakeNvml(2)
    nvml.hang(1, HANG_S)
    session = NvmlSession(nvml)
    builder = ManifestBuilder([GpuCollector(session, hostname="h")], host=lambda: {"hostname": "h"})
    started = time.perf_counter()
    manifest = builder.build()
    assert time.perf_counter() - started < 0.8
    assert [gpu["index"] for gpu in manifest["gpus"]] == [0]
    found = [c for c in manifest["checks"] if c["id"] == "gpu_unavailable"]
    assert found
    assert "gpu 1: no answer from NVML" in found[0]["message"]
