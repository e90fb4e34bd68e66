"""Rendering a manifest (local or from an exporter's /manifest) as readable tables, checks last."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table

from infergauge.engines.base import NEUTRAL_PARAMS

SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "dim"}


def _gib(value: Any) -> str:
    return f"{value / 2**30:.1f} GiB" if isinstance(value, (int, float)) else "?"


def host_table(host: dict[str, Any]) -> Table:
    """Host facts, one row each."""
    table = Table(title="Host", show_header=False)
    for key in ("hostname", "cpu_model", "cpu_count", "memory_bytes", "os", "kernel", "python"):
        value = _gib(host.get(key)) if key == "memory_bytes" else host.get(key, "?")
        table.add_row(key, str(value))
    return table


def gpu_table(gpus: list[dict[str, Any]], topology: dict[str, Any]) -> Table:
    """One row per GPU: memory, driver/CUDA, clocks vs max, power vs limit, locks, throttle reasons."""
    table = Table(title=f"GPUs ({len(gpus)}, interconnect: {topology.get('interconnect', '?')})")
    for column in (
        "#",
        "model",
        "memory",
        "driver / CUDA",
        "SM clock",
        "power",
        "persist",
        "locked",
        "events",
    ):
        table.add_column(column)
    for gpu in gpus:
        clocks = gpu.get("clocks", {})
        table.add_row(
            str(gpu["index"]),
            str(gpu.get("name")),
            _gib(gpu.get("memory_total_bytes")),
            f"{gpu.get('driver_version')} / {gpu.get('cuda_version')}",
            f"{clocks.get('sm_mhz', '?')} / {clocks.get('max_sm_mhz', '?')} MHz",
            f"{gpu.get('power_usage_w') or 0:.0f} / {gpu.get('power_limit_w') or 0:.0f} W",
            str(gpu.get("persistence_mode")),
            str(gpu.get("clock_locks", {}).get("locked")),
            ", ".join(gpu.get("clock_event_reasons", [])) or "-",
        )
    return table


def engine_table(engines: list[dict[str, Any]]) -> Table:
    """One row per engine with its neutral launch parameters."""
    table = Table(title=f"Engines ({len(engines)})")
    for column in ("engine", "version", "model", "pid", "url", "state", "params"):
        table.add_column(column)
    for engine in engines:
        params = engine.get("params", {})
        shown = " ".join(f"{k}={params[k]}" for k in NEUTRAL_PARAMS if k in params)
        table.add_row(
            str(engine.get("engine")),
            _with_age(str(engine.get("version") or "?"), (engine.get("stale") or {}).get("version")),
            str(engine.get("model") or "?"),
            str(engine.get("pid") or "-"),
            str(engine.get("url") or "-"),
            engine_state(engine),
            shown,
        )
    return table


def engine_state(engine: dict[str, Any]) -> str:
    """ready | not ready (answers, readiness not 200) | starting (process lives, no answer) | down."""
    if engine.get("up"):
        return "ready" if engine.get("ready", True) else "not ready"
    return "starting" if engine.get("pid") is not None else "down"


def _with_age(text: str, age_s: float | None) -> str:
    """A fact kept from an earlier poll (its endpoint timed out), with its age."""
    return text if age_s is None else f"{text} (stale {age_s:g} s)"


def check_table(checks: list[dict[str, str]]) -> Table:
    """Checks sorted error > warning > info."""
    table = Table(title="Checks")
    for column in ("severity", "check", "message"):
        table.add_column(column)
    order = {"error": 0, "warning": 1, "info": 2}
    for check in sorted(checks, key=lambda c: order.get(c["severity"], 3)):
        style = SEVERITY_STYLE.get(check["severity"], "")
        table.add_row(f"[{style}]{check['severity']}[/]", check["id"], check["message"])
    return table


def render(manifest: dict[str, Any], console: Console) -> None:
    """Print all tables."""
    console.print(host_table(manifest.get("host", {})))
    console.print(gpu_table(manifest.get("gpus", []), manifest.get("topology", {})))
    console.print(engine_table(manifest.get("engines", [])))
    console.print(check_table(manifest.get("checks", [])))


def has_error(manifest: dict[str, Any]) -> bool:
    """True when any check is an error (preflight exits 1)."""
    return any(check.get("severity") == "error" for check in manifest.get("checks", []))
