"""Engine collector: `infergauge_engine_info{engine,version,model,<neutral params>} 1`, `_up`, `_ready`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from prometheus_client.core import Metric

from exporter.checks import engine_checks
from exporter.discovery import nvml_process_ids
from exporter.engines import EngineInspector
from exporter.families import Families
from infergauge.engines.base import NEUTRAL_PARAMS


def _label(value: object) -> str:
    return "" if value is None else str(value).lower() if isinstance(value, bool) else str(value)


class EngineCollector:
    """One info and one up series per engine found (process on this host or --engine-url)."""

    name = "engine"

    def __init__(self, inspector: EngineInspector) -> None:
        self.inspector = inspector

    def scrape(self) -> tuple[list[Metric], bool]:
        """Families for every engine; a stopped engine is `up 0`, not a failed collector."""
        out = Families()
        for report in self.inspector.reports():
            base = {"engine": report.engine, "url": report.url or "", "model": report.model or ""}
            info = {**base, "version": report.version or "", "pid": _label(report.pid)}
            info.update({key: _label(report.params.get(key)) for key in NEUTRAL_PARAMS})
            out.add(
                "infergauge_engine_info",
                "gauge",
                "Engine identity and launch parameters (engine-neutral names); value is always 1.",
                info,
                1.0,
            )
            out.add(
                "infergauge_engine_up",
                "gauge",
                "1 when the engine answered HTTP (any endpoint, any status) on this scrape.",
                base,
                1.0 if report.up else 0.0,
            )
            out.add(
                "infergauge_engine_ready",
                "gauge",
                "1 when the engine's readiness endpoint (/health) answered 200 on this scrape.",
                base,
                1.0 if report.ready else 0.0,
            )
        return out.metrics(), True

    def facts(self, known: Mapping[str, Any]) -> dict[str, Any]:
        """The manifest's `engines` (re-read) and their checks; GPU 0's size for vLLM's defaults, the
        GPUs' process lists for each engine's `gpu_pids`."""
        gpus = known.get("gpus") or []
        if gpus and self.inspector.gpu_memory_bytes is None:  # see infergauge/engines/vllm.py (GpuDefault)
            self.inspector.gpu_memory_bytes = gpus[0]["memory_total_bytes"]
            self.inspector.gpu_name = gpus[0]["name"]
        self.inspector.nvml_pids = nvml_process_ids(gpus)
        engines = [report.as_dict() for report in self.inspector.reports(fresh=True)]
        return {"engines": engines, "checks": engine_checks(engines, self.inspector.engine_urls)}
