"""Generator of infergauge's dashboards and engine rules: `python -m grafana.dashgen` rewrites
grafana/dashboards/, prometheus/rules/engines.yml and the engine jobs of prometheus/*.yml."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import baselines, engines, gpu_host, promgen, run_compare, run_live

DASHBOARD_DIR = Path(__file__).resolve().parents[1] / "dashboards"

# file name -> builder; the uid inside each is stable (links and `loadgen grafana push` rely on it);
# one engine dashboard per registered engine (grafana/dashgen/engines.py)
BUILDERS: dict[str, Callable[[], dict[str, Any]]] = {
    "run-live.json": run_live.build,
    "run-comparison.json": run_compare.build,
    "gpu-host.json": gpu_host.build,
    **engines.builders(),
    "baselines.json": baselines.build,
}


def render(builder: Callable[[], dict[str, Any]]) -> str:
    """The JSON text written for one dashboard (stable key order, trailing newline)."""
    return json.dumps(builder(), indent=2, sort_keys=False) + "\n"


def outputs(
    directory: Path = DASHBOARD_DIR, prometheus: Path | None = promgen.PROMETHEUS_DIR
) -> dict[Path, str]:
    """Every file the generator writes -> its text: the dashboards and, unless `prometheus` is None,
    the engine rules and scrape jobs (grafana/dashgen/promgen.py)."""
    out = {directory / name: render(builder) for name, builder in BUILDERS.items()}
    if prometheus is not None:
        out.update(promgen.outputs(prometheus))
    return out


def write_all(
    directory: Path = DASHBOARD_DIR, prometheus: Path | None = promgen.PROMETHEUS_DIR
) -> list[Path]:
    """Write every generated file; returns the paths written."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for path, text in outputs(directory, prometheus).items():
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def drifted(directory: Path = DASHBOARD_DIR, prometheus: Path | None = promgen.PROMETHEUS_DIR) -> list[Path]:
    """The generated files that are missing or differ from what `write_all` would write (nothing written)."""
    return [
        path
        for path, text in outputs(directory, prometheus).items()
        if not path.is_file() or path.read_text(encoding="utf-8") != text
    ]
