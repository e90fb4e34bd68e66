"""Generator of infergauge's Grafana dashboards: `python -m grafana.dashgen` rewrites grafana/dashboards/."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import baselines, engines, gpu_host, run_compare, run_live

DASHBOARD_DIR = Path(__file__).resolve().parents[1] / "dashboards"

# file name -> builder; the uid inside each is stable (links and `loadgen grafana push` rely on it)
BUILDERS: dict[str, Callable[[], dict[str, Any]]] = {
    "run-live.json": run_live.build,
    "run-comparison.json": run_compare.build,
    "gpu-host.json": gpu_host.build,
    "engine-vllm.json": engines.build_vllm,
    "engine-sglang.json": engines.build_sglang,
    "baselines.json": baselines.build,
}


def render(builder: Callable[[], dict[str, Any]]) -> str:
    """The JSON text written for one dashboard (stable key order, trailing newline)."""
    return json.dumps(builder(), indent=2, sort_keys=False) + "\n"


def write_all(directory: Path = DASHBOARD_DIR) -> list[Path]:
    """Write every dashboard; returns the paths written."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, builder in BUILDERS.items():
        path = directory / name
        path.write_text(render(builder), encoding="utf-8")
        written.append(path)
    return written


def drifted(directory: Path = DASHBOARD_DIR) -> list[Path]:
    """The dashboard files that are missing or differ from what `write_all` would write (nothing written)."""
    stale = []
    for name, builder in BUILDERS.items():
        path = directory / name
        if not path.is_file() or path.read_text(encoding="utf-8") != render(builder):
            stale.append(path)
    return stale
