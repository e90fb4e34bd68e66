"""GET /manifest: host, GPUs, topology, engines and checks as one JSON object (docs/CONTRACTS.md).

The manifest asks each collector for its `facts()`; only checks across collectors live here.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Sequence
from typing import Any

from exporter.checks import finding, gpu_checks
from exporter.collectors.base import Collector
from exporter.host import host_facts

LOG = logging.getLogger(__name__)


class ManifestBuilder:
    """Builds the manifest from the collectors' facts (host facts read directly when none has them)."""

    def __init__(
        self, collectors: Sequence[Collector], *, host: Callable[[], dict[str, Any]] = host_facts
    ) -> None:
        self.collectors = list(collectors)
        self.host = host

    def build(self) -> dict[str, Any]:
        """A fresh manifest (engines re-read, not cached)."""
        known: dict[str, Any] = {
            "gpus": [],
            "topology": {"matrix": [], "interconnect": "unknown"},
            "engines": [],
        }
        checks: list[dict[str, str]] = []
        for collector in self.collectors:
            try:
                part = collector.facts(known)
            except Exception as exc:  # one collector's facts failing leaves the others' manifest
                LOG.warning("collector %s facts failed: %s", collector.name, exc)
                checks.append(finding("collector_facts_failed", "warning", f"{collector.name}: {exc}"))
                continue
            checks += part.pop("checks", [])
            known.update(part)
        engines = known["engines"]
        engine_pids = {pid for e in engines for pid in [e["pid"], *e["gpu_pids"]] if pid is not None}
        checks += gpu_checks(known["gpus"], engine_pids)
        return {
            "collected_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
            "host": known.get("host") or self.host(),
            "gpus": known["gpus"],
            "topology": known["topology"],
            "engines": engines,
            "checks": checks,
        }
