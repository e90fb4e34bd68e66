"""GPU collector against an injected fake NVML: names, labels, units, per-field fallback, lost GPUs."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from exporter.collectors.base import CollectorSet
from exporter.collectors.gpu import GpuCollector
from exporter.nvml.fake import DRIVER_NOT_LOADED, LIBRARY_NOT_FOUND, RM_VERSION_MISMATCH, FakeGpu, FakeNvml
from exporter.nvml.sampler import GpuSampler
from exporter.nvml.session import NvmlSession

MIB = 2**20


def registry_for(nvml: FakeNvml, *, sampler: bool = False) -> tuple[CollectorRegistry, GpuSampler | None]:
    session = NvmlSession(nvml)
    gpu_sampler = GpuSampler(session, interval_s=0) if sampler else None
    registry = CollectorRegistry(auto_describe=False)
    collector = GpuCollector(
        session, sampler=gpu_sampler, hostname="node-a", name_of_pid=lambda pid: f"proc{pid}"
    )
    registry.register(CollectorSet([collector]))
    return registry, gpu_sampler


def dcgm_labels(index: int) -> dict[str, str]:
    gpu = FakeGpu(index)
    return {
        "gpu": str(index),
        "UUID": gpu.uuid,
        "device": f"nvidia{index}",
        "modelName": "NVIDIA H200",
        "Hostname": "node-a",
        "pci_bus_id": gpu.bus_id,
        "DCGM_FI_DRIVER_VERSION": "580.159.04",
    }


def own_labels(index: int) -> dict[str, str]:
    labels = dcgm_labels(index)
    del labels["modelName"], labels["DCGM_FI_DRIVER_VERSION"]
    return labels


def test_dcgm_fields_have_dcgm_names_labels_and_units() -> None:
    registry, _ = registry_for(FakeNvml(1))
    value = lambda name: registry.get_sample_value(name, dcgm_labels(0))  # noqa: E731
    assert value("DCGM_FI_DEV_FB_USED") == 72177  # MiB, from 72177 * 2**20 bytes
    assert value("DCGM_FI_DEV_FB_RESERVED") == 555
    # free = total - used - reserved = 143771 - 72177 - 555 MiB
    assert value("DCGM_FI_DEV_FB_FREE") == 143771 - 72177 - 555
    assert value("DCGM_FI_DEV_POWER_USAGE") == 127.37  # W, from 127370 mW
    assert value("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION") == 123_456_789  # mJ, untouched
    assert value("DCGM_FI_DEV_GPU_UTIL") == 9
    assert value("DCGM_FI_DEV_MEM_COPY_UTIL") == 3
    assert value("DCGM_FI_DEV_SM_CLOCK") == 1980
    assert value("DCGM_FI_DEV_MEM_CLOCK") == 3201
    assert value("DCGM_FI_DEV_GPU_TEMP") == 39
    assert value("DCGM_FI_DEV_MEMORY_TEMP") == 45.0
    assert value("DCGM_FI_DEV_PCIE_REPLAY_COUNTER") == 0
    assert value("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS") == 0
    assert registry.get_sample_value("infergauge_collector_success", {"collector": "gpu"}) == 1


def test_clock_event_reasons_one_series_per_reason() -> None:
    nvml = FakeNvml([FakeGpu(0, clock_reasons=0x4 | 0x40)])  # power cap + HW thermal slowdown
    registry, _ = registry_for(nvml)
    active = {
        reason: registry.get_sample_value(
            "infergauge_gpu_clock_event_active", {**own_labels(0), "reason": reason}
        )
        for reason in ("gpu_idle", "sw_power_cap", "hw_thermal_slowdown", "hw_slowdown")
    }
    assert active == {"gpu_idle": 0.0, "sw_power_cap": 1.0, "hw_thermal_slowdown": 1.0, "hw_slowdown": 0.0}


def test_deprecated_throttle_reasons_function_is_the_fallback() -> None:
    nvml = FakeNvml([FakeGpu(0, clock_reasons=0x1)], missing={"nvmlDeviceGetCurrentClocksEventReasons"})
    registry, _ = registry_for(nvml)
    labels = {**own_labels(0), "reason": "gpu_idle"}
    assert registry.get_sample_value("infergauge_gpu_clock_event_active", labels) == 1.0


def test_process_memory_per_pid() -> None:
    nvml = FakeNvml([FakeGpu(0, processes=[(736, 5 * MIB), (900, 7 * MIB)])])
    registry, _ = registry_for(nvml)
    got = registry.get_sample_value(
        "infergauge_gpu_process_memory_bytes", {**own_labels(0), "pid": "900", "process": "proc900"}
    )
    assert got == 7 * MIB


def test_unsupported_and_missing_functions_drop_only_their_fields() -> None:
    nvml = FakeNvml(
        1,
        unsupported={"nvmlDeviceGetPowerUsage", "nvmlDeviceGetFieldValues"},
        missing={"nvmlDeviceGetRemappedRows", "nvmlGpmQueryDeviceSupport"},
    )
    registry, _ = registry_for(nvml)
    labels = dcgm_labels(0)
    assert registry.get_sample_value("DCGM_FI_DEV_POWER_USAGE", labels) is None
    assert registry.get_sample_value("DCGM_FI_DEV_MEMORY_TEMP", labels) is None
    assert registry.get_sample_value("DCGM_FI_DEV_ROW_REMAP_FAILURE", labels) is None
    assert registry.get_sample_value("DCGM_FI_DEV_GPU_TEMP", labels) == 39
    assert registry.get_sample_value("infergauge_collector_success", {"collector": "gpu"}) == 1


def test_old_driver_without_memory_v2_still_reports_used_and_free() -> None:
    class OldNvml(FakeNvml):
        def nvmlDeviceGetMemoryInfo(self, h: FakeGpu, version: int | None = None) -> object:
            if version is not None:
                raise self.NVMLError(3)
            return super().nvmlDeviceGetMemoryInfo(h)

    registry, _ = registry_for(OldNvml(1))
    assert registry.get_sample_value("DCGM_FI_DEV_FB_USED", dcgm_labels(0)) == 72177
    assert registry.get_sample_value("DCGM_FI_DEV_FB_RESERVED", dcgm_labels(0)) is None


def test_lost_gpu_drops_only_its_series() -> None:
    registry, _ = registry_for(FakeNvml(3, lost={1}))
    assert registry.get_sample_value("DCGM_FI_DEV_GPU_TEMP", dcgm_labels(0)) == 39
    assert registry.get_sample_value("DCGM_FI_DEV_GPU_TEMP", dcgm_labels(2)) == 39
    assert registry.get_sample_value("DCGM_FI_DEV_GPU_TEMP", dcgm_labels(1)) is None
    assert registry.get_sample_value("infergauge_gpu_up", {"gpu": "1", "Hostname": "node-a"}) == 0
    assert registry.get_sample_value("infergauge_gpu_up", {"gpu": "2", "Hostname": "node-a"}) == 1
    assert registry.get_sample_value("infergauge_collector_success", {"collector": "gpu"}) == 0


@pytest.mark.parametrize("code", [DRIVER_NOT_LOADED, LIBRARY_NOT_FOUND])
def test_host_without_gpu_is_a_fact_not_a_failure(code: int) -> None:
    registry, _ = registry_for(FakeNvml(1, init_error=code))
    assert registry.get_sample_value("infergauge_gpus", {"Hostname": "node-a"}) == 0
    assert registry.get_sample_value("infergauge_collector_success", {"collector": "gpu"}) == 1
    assert registry.get_sample_value("DCGM_FI_DEV_GPU_TEMP", dcgm_labels(0)) is None


def test_nvml_failing_on_a_present_gpu_is_a_failed_collector_not_a_failed_scrape() -> None:
    # the driver is there but NVML refuses (library/driver version mismatch): the collector failed
    registry, _ = registry_for(FakeNvml(1, init_error=RM_VERSION_MISMATCH))
    assert registry.get_sample_value("infergauge_collector_success", {"collector": "gpu"}) == 0
    assert registry.get_sample_value("infergauge_collector_duration_seconds", {"collector": "gpu"}) >= 0
    assert registry.get_sample_value("infergauge_gpus", {"Hostname": "node-a"}) is None


def test_gpu_count_is_reported() -> None:
    registry, _ = registry_for(FakeNvml(3))
    assert registry.get_sample_value("infergauge_gpus", {"Hostname": "node-a"}) == 3


def test_topology_pairs_over_nvlink_switch_and_pcie() -> None:
    registry, _ = registry_for(FakeNvml(2, nvlink=True))
    # Through an NVSwitch every active link (18 on the fake) counts, as nvidia-smi topo -m prints NV18.
    assert (
        registry.get_sample_value(
            "infergauge_gpu_topology_info", {"gpu": "0", "peer": "1", "link": "NV18", "Hostname": "node-a"}
        )
        == 1
    )
    registry, _ = registry_for(FakeNvml(2, nvlink=False))
    assert (
        registry.get_sample_value(
            "infergauge_gpu_topology_info", {"gpu": "1", "peer": "0", "link": "PHB", "Hostname": "node-a"}
        )
        == 1
    )


def test_sampler_peaks_gpm_and_xid() -> None:
    nvml = FakeNvml(2, xid_events=[(1, 79)])
    registry, sampler = registry_for(nvml, sampler=True)
    assert sampler is not None
    sampler.tick()
    nvml.gpus[0].power_mw = 650_000  # a spike the sampler sees between scrapes
    sampler.tick()
    nvml.gpus[0].power_mw = 200_000  # back down when the scrape reads the current value
    labels = own_labels(0)
    assert registry.get_sample_value("infergauge_gpu_power_usage_peak_watts", labels) == 650.0
    assert registry.get_sample_value("DCGM_FI_DEV_POWER_USAGE", dcgm_labels(0)) == 200.0
    # GPM: NVML percent -> DCGM ratio (42 % -> 0.42)
    assert registry.get_sample_value("DCGM_FI_PROF_GR_ENGINE_ACTIVE", dcgm_labels(0)) == 0.42
    assert registry.get_sample_value("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", dcgm_labels(0)) == 0.125
    assert registry.get_sample_value("DCGM_FI_DEV_XID_ERRORS", dcgm_labels(1)) == 79
    assert registry.get_sample_value("DCGM_FI_DEV_XID_ERRORS", dcgm_labels(0)) == 0
    # the peak window was reset by the scrape above: now only the current reading remains
    assert registry.get_sample_value("infergauge_gpu_power_usage_peak_watts", labels) == 200.0


def test_gpm_ratios_stay_with_their_gpu_when_gpus_are_sampled_in_parallel() -> None:
    gpus = [FakeGpu(i, gpm_percent={1: 10.0 * (i + 1), 5: 0.0, 10: 0.0}) for i in range(4)]
    registry, sampler = registry_for(FakeNvml(gpus), sampler=True)
    assert sampler is not None
    for _ in range(3):
        sampler.tick()
    got = [registry.get_sample_value("DCGM_FI_PROF_GR_ENGINE_ACTIVE", dcgm_labels(i)) for i in range(4)]
    assert got == [0.1, 0.2, 0.3, 0.4]  # 10 %, 20 %, 30 %, 40 % -> ratios


def test_registering_never_touches_nvml() -> None:
    fresh = FakeNvml(1)
    session = NvmlSession(fresh)
    # even a registry that describes collectors on register (like the default one) does not scrape
    CollectorRegistry(auto_describe=True).register(CollectorSet([GpuCollector(session, hostname="h")]))
    assert fresh.calls == 0


def test_gpm_sample_failure_frees_the_sample_and_reports_no_ratio() -> None:
    class Counting(FakeNvml):
        allocated = 0
        freed = 0

        def nvmlGpmSampleAlloc(self) -> object:  # noqa: N802 - pynvml's name
            self.allocated += 1
            return super().nvmlGpmSampleAlloc()

        def nvmlGpmSampleFree(self, sample: object) -> None:  # noqa: N802 - pynvml's name
            self.freed += 1

    nvml = Counting(1, unsupported={"nvmlGpmSampleGet"})
    registry, sampler = registry_for(nvml, sampler=True)
    assert sampler is not None
    for _ in range(3):
        sampler.tick()
    assert nvml.allocated == 3
    assert nvml.freed == 3
    assert registry.get_sample_value("DCGM_FI_PROF_GR_ENGINE_ACTIVE", dcgm_labels(0)) is None


def test_violation_durations_in_dcgm_microseconds() -> None:
    nvml = FakeNvml([FakeGpu(0, violation_ns={0: 21_828_614_000, 1: 5_000})])
    registry, _ = registry_for(nvml)
    # NVML counts nanoseconds; DCGM_FI_DEV_*_VIOLATION are microseconds: 21828614000 ns = 21828614 us
    assert registry.get_sample_value("DCGM_FI_DEV_POWER_VIOLATION", dcgm_labels(0)) == 21_828_614
    assert registry.get_sample_value("DCGM_FI_DEV_THERMAL_VIOLATION", dcgm_labels(0)) == 5
    assert registry.get_sample_value("DCGM_FI_DEV_RELIABILITY_VIOLATION", dcgm_labels(0)) == 0


def test_slow_fields_come_from_the_sampler_not_the_scrape() -> None:
    class Counting(FakeNvml):
        violation_calls = 0

        def nvmlDeviceGetViolationStatus(self, h: FakeGpu, policy: int) -> object:  # noqa: N802
            self.violation_calls += 1
            return super().nvmlDeviceGetViolationStatus(h, policy)

    nvml = Counting(1)
    registry, sampler = registry_for(nvml, sampler=True)
    assert sampler is not None
    sampler.tick()
    after_tick = nvml.violation_calls
    assert after_tick == 6  # one call per NVML perf policy
    assert registry.get_sample_value("DCGM_FI_DEV_POWER_VIOLATION", dcgm_labels(0)) == 21_828_614
    assert nvml.violation_calls == after_tick  # the scrape used the sampler's reading
    sampler.tick()  # within violations_every_s: not read again
    assert nvml.violation_calls == after_tick


def test_slow_fields_one_gpu_per_tick_round_robin() -> None:
    class Counting(FakeNvml):
        energy_reads: list[int] = []

        def nvmlDeviceGetTotalEnergyConsumption(self, h: FakeGpu) -> int:  # noqa: N802
            self.energy_reads.append(h.index)
            return super().nvmlDeviceGetTotalEnergyConsumption(h)

    nvml = Counting(3)
    nvml.energy_reads = []
    session = NvmlSession(nvml)
    sampler = GpuSampler(session, interval_s=0)
    for _ in range(3):
        sampler.tick()
    # one GPU's slow read per tick, so a scrape never waits behind all of them
    assert nvml.energy_reads == [0, 1, 2]
    sampler.tick()  # GPU 0 again, but read less than slow_every_s ago: skipped
    assert nvml.energy_reads == [0, 1, 2]
