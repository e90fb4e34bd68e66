"""Engine collector: `infergauge_engine_info{engine,version,model,<neutral params>} 1`, `_up`, `_ready`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from prometheus_client.core import Metric

from exporter.checks import engine_checks, finding
from exporter.discovery import nvml_process_ids
from exporter.engines import EngineInspector
from exporter.families import Families
from infergauge.engines.base import NEUTRAL_PARAMS

# /manifest answers within this from the facts it has: loadgen allows the default exporter 1 s, and
# SGLang's generating /health alone may take 5 s (a stale reading carries `facts_age_s`).
MANIFEST_BUDGET_S = 0.5


def _label(value: object) -> str:
    return "" if value is None else str(value).lower() if isinstance(value, bool) else str(value)


class EngineCollector:
    """One info and one up series per engine found (process on this host or --engine-url)."""

    name = "engine"

    def __init__(self, inspector: EngineInspector, budget_s: float = MANIFEST_BUDGET_S) -> None:
        self.inspector = inspector
        self.budget_s = budget_s

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
        reports, age_s = self.inspector.reports_within(self.budget_s)
        engines = [{**report.as_dict(), "facts_age_s": round(age_s, 3)} for report in reports]
        checks = engine_checks(engines, self.inspector.engine_urls)
        if age_s > 0:
            checks.append(
                finding(
                    "engine_facts_stale",
                    "info",
                    f"engine facts are {age_s:.1f} s old: the engines' endpoints did not all answer "
                    f"within the manifest's {self.budget_s:g} s budget (read again in the background)",
                )
            )
        return {"engines": engines, "checks": checks}
