"""Host collector: `infergauge_host_info{hostname,cpu_model,cpu_count,os,kernel,python} 1` and memory."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from prometheus_client.core import Metric

from exporter.families import Families
from exporter.host import host_facts


class HostCollector:
    """Static host facts, read once and cached."""

    name = "host"

    def __init__(self, facts: Callable[[], dict[str, Any]] = host_facts) -> None:
        self._read = facts
        self._facts: dict[str, Any] | None = None

    def _cached(self) -> dict[str, Any]:
        if self._facts is None:
            self._facts = self._read()
        return self._facts

    def facts(self, known: Mapping[str, Any]) -> dict[str, Any]:
        """The manifest's `host`."""
        return {"host": dict(self._cached())}

    def scrape(self) -> tuple[list[Metric], bool]:
        """The info series and `infergauge_host_memory_bytes`."""
        facts = self._cached()
        out = Families()
        labels = {k: str(facts[k]) for k in ("hostname", "cpu_model", "cpu_count", "os", "kernel", "python")}
        out.add("infergauge_host_info", "gauge", "Host identity; value is always 1.", labels, 1.0)
        out.add(
            "infergauge_host_memory_bytes",
            "gauge",
            "Physical memory of the host.",
            {"hostname": labels["hostname"]},
            float(facts["memory_bytes"]),
        )
        return out.metrics(), True
