"""GET /manifest: host, GPUs, topology, engines and checks as one JSON object (docs/CONTRACTS.md)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from exporter.checks import _check, engine_checks, gpu_checks
from exporter.engines import EngineInspector
from exporter.gpu_facts import gpu_manifest
from exporter.gpu_sampler import GpuSampler
from exporter.host import host_facts
from exporter.nvml import NvmlSession


class ManifestBuilder:
    """Builds the manifest from the same sources the collectors use."""

    def __init__(
        self,
        session: NvmlSession | None,
        inspector: EngineInspector | None,
        *,
        sampler: GpuSampler | None = None,
        host: Callable[[], dict[str, Any]] = host_facts,
    ) -> None:
        self.session = session
        self.inspector = inspector
        self.sampler = sampler
        self.host = host

    def build(self) -> dict[str, Any]:
        """A fresh manifest (engines re-read, not cached)."""
        checks: list[dict[str, str]] = []
        gpus: list[dict[str, Any]] = []
        topology: dict[str, Any] = {"matrix": [], "interconnect": "unknown"}
        if self.session is not None:
            gpus, topology, error = gpu_manifest(self.session)
            if error:
                checks.append(_check("gpu_unavailable", "warning" if not gpus else "error", error))
            for gpu in gpus:
                if self.sampler is not None:
                    gpu["xid"] = self.sampler.last_xid(gpu["index"])
        if self.inspector is not None and gpus and self.inspector.gpu_memory_bytes is None:
            # vLLM's batch defaults depend on the GPU (see infergauge/engines/vllm.py)
            self.inspector.gpu_memory_bytes = gpus[0]["memory_total_bytes"]
            self.inspector.gpu_name = gpus[0]["name"]
        engines = [r.as_dict() for r in self.inspector.reports(fresh=True)] if self.inspector else []
        if self.inspector is not None:
            checks += engine_checks(engines, self.inspector.engine_urls)
        engine_pids = {pid for e in engines for pid in [e["pid"], *e["gpu_pids"]] if pid is not None}
        checks += gpu_checks(gpus, engine_pids)
        return {
            "collected_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z"),
            "host": self.host(),
            "gpus": gpus,
            "topology": topology,
            "engines": engines,
            "checks": checks,
        }
