"""The collector interface and the wrapper that times it and never lets one failure fail a scrape."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from prometheus_client.core import GaugeMetricFamily, Metric

LOG = logging.getLogger(__name__)


class Collector(Protocol):
    """One source: `scrape()` returns its families and whether it did its job; `facts()` its part of
    the manifest (`known` holds the parts of the collectors before it; a `checks` list is appended)."""

    name: str

    def scrape(self) -> tuple[list[Metric], bool]: ...

    def facts(self, known: Mapping[str, Any]) -> dict[str, Any]: ...


@runtime_checkable
class Background(Protocol):
    """A collector with background work (the GPU sampler): started and stopped with the exporter."""

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def tick(self) -> None: ...


class CollectorSet:
    """A prometheus_client collector over several Collectors, each isolated and timed.

    Emits `infergauge_collector_success{collector}` (1 = the collector did its job; what it watches
    being down or absent is a value, not a failure) and
    `infergauge_collector_duration_seconds{collector}` for each, whatever happens inside.
    """

    def __init__(self, collectors: Sequence[Collector]) -> None:
        self.collectors = list(collectors)

    def collect(self) -> Iterable[Metric]:
        success = GaugeMetricFamily(
            "infergauge_collector_success",
            "1 when the collector read all of its sources on this scrape.",
            labels=["collector"],
        )
        duration = GaugeMetricFamily(
            "infergauge_collector_duration_seconds",
            "Time the collector took on this scrape.",
            labels=["collector"],
        )
        for collector in self.collectors:
            started = time.perf_counter()
            try:
                families, ok = collector.scrape()
            except Exception as exc:  # a failing collector is a success=0 sample, not a failed scrape
                LOG.warning("collector %s failed: %s", collector.name, exc)
                families, ok = [], False
            duration.add_metric([collector.name], time.perf_counter() - started)
            success.add_metric([collector.name], 1.0 if ok else 0.0)
            yield from families
        yield success
        yield duration

    def describe(self) -> list[Metric]:
        """Nothing: keeps registration from calling collect() (no NVML at import/registration)."""
        return []
