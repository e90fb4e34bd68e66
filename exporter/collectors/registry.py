"""The name -> factory map of collectors: adding a source is one collector file and one entry here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from exporter.collectors.base import Collector
from exporter.collectors.engine import EngineCollector
from exporter.collectors.gpu import GpuCollector
from exporter.collectors.host import HostCollector
from exporter.engines import EngineInspector
from exporter.nvml.facts import first_gpu_hint
from exporter.nvml.sampler import GpuSampler
from exporter.nvml.session import NvmlSession

if TYPE_CHECKING:
    from exporter.app import ExporterConfig


class UnknownCollector(ValueError):
    """A collector name that is not in FACTORIES."""


@dataclass
class Sources:
    """What collectors read, injectable in tests: NVML (not initialised until first read), engines."""

    session: NvmlSession
    inspector: EngineInspector | None = None


def gpu(config: ExporterConfig, sources: Sources) -> GpuCollector:
    """NVML GPUs under dcgm-exporter names, with the background sampler."""
    sampler = GpuSampler(sources.session, config.sample_interval_s, timeout_s=config.nvml_timeout_s)
    return GpuCollector(sources.session, sampler=sampler, timeout_s=config.nvml_timeout_s)


def engine(config: ExporterConfig, sources: Sources) -> EngineCollector:
    """Engines found on this host or named by URL."""
    inspector = sources.inspector or EngineInspector(
        config.engine_urls,
        discover=config.discover,
        api_key=config.engine_api_key,
        http_timeout_s=config.http_timeout_s,
    )
    if "gpu" in config.collectors:  # vLLM's batch defaults depend on the GPU (infergauge/engines/vllm.py)
        inspector.gpu_memory_bytes, inspector.gpu_name = first_gpu_hint(
            sources.session, config.nvml_timeout_s
        )
    return EngineCollector(inspector)


def host(config: ExporterConfig, sources: Sources) -> HostCollector:
    """Static host facts."""
    return HostCollector()


# In manifest order: the engine collector's facts use the GPUs listed before them.
FACTORIES: dict[str, Callable[[ExporterConfig, Sources], Collector]] = {
    "gpu": gpu,
    "engine": engine,
    "host": host,
}
COLLECTORS = tuple(FACTORIES)


def check_names(names: tuple[str, ...]) -> None:
    """Raise UnknownCollector naming the first unknown name and the valid ones."""
    for name in names:
        if name not in FACTORIES:
            raise UnknownCollector(f"unknown collector {name!r}; choose from {', '.join(FACTORIES)}")


def build_collectors(config: ExporterConfig, sources: Sources) -> list[Collector]:
    """The collectors `config.collectors` names, in FACTORIES order."""
    check_names(config.collectors)
    return [factory(config, sources) for name, factory in FACTORIES.items() if name in config.collectors]
