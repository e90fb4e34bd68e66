"""The seed's preflight as data: findings over a manifest, each {id, severity, message}.

error   -> `loadgen preflight` exits 1 (numbers taken now would not be trustworthy)
warning -> worth a look before a run; info -> recorded for explanation.
"""

from __future__ import annotations

from typing import Any

from infergauge.engines import names_text

HARD_THROTTLE = {"hw_slowdown", "hw_thermal_slowdown", "sw_thermal_slowdown", "hw_power_brake_slowdown"}
SOFT_THROTTLE = {"sw_power_cap"}


def finding(check_id: str, severity: str, message: str) -> dict[str, str]:
    """One check result as the manifest lists it."""
    return {"id": check_id, "severity": severity, "message": message}


def gpu_checks(gpus: list[dict[str, Any]], engine_pids: set[int]) -> list[dict[str, str]]:
    """Throttling now, foreign GPU processes, ECC/row-remap errors, unlocked clocks, persistence mode."""
    found: list[dict[str, str]] = []
    for gpu in gpus:
        tag = f"gpu {gpu['index']} ({gpu['name']})"
        reasons = set(gpu.get("clock_event_reasons", []))
        if reasons & HARD_THROTTLE:
            found.append(
                finding("gpu_throttling", "error", f"{tag} is throttled now: {', '.join(sorted(reasons))}")
            )
        elif reasons & SOFT_THROTTLE:
            found.append(finding("gpu_power_capped", "warning", f"{tag} is at its power cap now"))
        foreign = [p for p in gpu.get("processes", []) if p["pid"] not in engine_pids]
        if foreign and engine_pids:
            names = ", ".join(f"{p['pid']} {p['process']}" for p in foreign)
            found.append(
                finding(
                    "foreign_gpu_processes", "warning", f"{tag} has processes besides the engine: {names}"
                )
            )
        elif foreign:
            names = ", ".join(f"{p['pid']} {p['process']}" for p in foreign)
            found.append(
                finding("gpu_processes", "info", f"{tag} has processes and no engine was found: {names}")
            )
        bad = {
            k: v
            for k, v in gpu.get("errors", {}).items()
            if v and ("DBE" in k or "UNCORRECTABLE" in k or "FAILURE" in k)
        }
        if bad:
            found.append(finding("gpu_memory_errors", "error", f"{tag} reports memory errors: {bad}"))
        if gpu.get("xid"):
            found.append(finding("gpu_xid", "error", f"{tag} last XID error {gpu['xid']}"))
        if not gpu.get("clock_locks", {}).get("locked"):
            found.append(
                finding(
                    "clocks_not_locked",
                    "info",
                    f"{tag} clocks are not locked; boost varies run to run (nvidia-smi -lgc to lock)",
                )
            )
        if gpu.get("persistence_mode") is False:
            found.append(finding("persistence_mode_off", "warning", f"{tag} persistence mode is off"))
    if len({g["name"] for g in gpus}) > 1:
        found.append(finding("mixed_gpu_models", "warning", "GPUs of different models on one host"))
    return found


def engine_checks(engines: list[dict[str, Any]], configured_urls: list[str]) -> list[dict[str, str]]:
    """Configured engines that do not answer (error; `starting`, a warning, while their process
    lives) or answer but are not ready (warning), no engine at all, unknown versions. A slow
    optional endpoint (stale facts) is neither: the engine answered."""
    found: list[dict[str, str]] = []
    if not engines:
        found.append(finding("no_engine", "info", f"no {names_text()} found on this host"))
    for engine in engines:
        if not engine["up"] and engine.get("pid") is not None:  # its process lives: still starting
            found.append(
                finding(
                    "engine_starting",
                    "warning",
                    f"{engine['engine']} at {engine['url']} is starting: process {engine['pid']} lives "
                    "but does not answer HTTP yet (loading weights, compiling)",
                )
            )
        elif engine["url"] in configured_urls and not engine["up"]:
            found.append(
                finding("engine_down", "error", f"{engine['engine']} at {engine['url']} does not answer")
            )
        if engine["up"] and not engine.get("ready", True):
            found.append(
                finding(
                    "engine_not_ready",
                    "warning",
                    f"{engine['engine']} at {engine['url']} answers but its readiness endpoint is not 200"
                    " (starting, warming up or unhealthy)",
                )
            )
        if engine["up"] and not engine.get("version"):
            found.append(finding("engine_version_unknown", "warning", f"{engine['engine']} version unknown"))
    return found
