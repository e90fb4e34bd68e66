"""Runs whose own record says they were unreliable (pure): kept out of the check, and said so.

A run is *noisy* when its summary or manifest records that it did not measure the engine alone:
- `client saturated`: loadgen's own core set the pace (summary `client_saturated.saturated`);
- `late`: the client sent requests late (summary `schedule_lag_s.p99` over `MAX_LAG_S`);
- `failed requests`: the failed share is over the run's `config.max_error_rate`: its latencies are
  those of a broken run (the run still counts for the error-rate test, which is about exactly that);
- `foreign GPU process`: the exporter saw another process on the benchmark GPU
  (`exporter.checks` id `foreign_gpu_processes`);
- `host load`: the client host's load during the run (`client.load`, recorded by the run manifest)
  shows CPU steal over `MAX_STEAL` or a 1-minute load average over `MAX_LOAD_PER_CPU` per CPU.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

MAX_LAG_S = 0.5  # p99 of send - due time beyond which the schedule was not kept
MAX_STEAL = 0.10  # share of CPU time stolen by the hypervisor during the run
MAX_LOAD_PER_CPU = 4.0  # 1-minute load average per CPU at the end of the run
FAILED = "failed requests"  # the reason that keeps a run in the error-rate test


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _section(record: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = record.get(key)
    return value if isinstance(value, Mapping) else {}


def _failed(summary: Mapping[str, Any], manifest: Mapping[str, Any]) -> str | None:
    limit = _number(_section(manifest, "config").get("max_error_rate"))
    share = _number(summary.get("error_rate"))
    if limit is None or share is None or share <= limit:
        return None
    return f"{FAILED} {share:.1%} > limit {limit:.1%}"


def _host(manifest: Mapping[str, Any]) -> str | None:
    load = _section(_section(manifest, "client"), "load")
    steal, per_cpu = _number(load.get("steal_share")), _number(load.get("loadavg_1m_per_cpu"))
    if steal is not None and steal > MAX_STEAL:
        return f"host load: CPU steal {steal:.0%} > {MAX_STEAL:.0%}"
    if per_cpu is not None and per_cpu > MAX_LOAD_PER_CPU:
        return f"host load: load average {per_cpu:.1f} per CPU > {MAX_LOAD_PER_CPU:g}"
    return None


def noisy_reasons(summary: Mapping[str, Any], manifest: Mapping[str, Any]) -> list[str]:
    """Why a run's record says it is unreliable (empty: it is not)."""
    reasons = []
    if _section(summary, "client_saturated").get("saturated"):
        reasons.append("client saturated")
    lag = _number(_section(summary, "schedule_lag_s").get("p99"))
    if lag is not None and lag > MAX_LAG_S:
        reasons.append(f"late: schedule lag p99 {lag:.2f} s > {MAX_LAG_S:g} s")
    checks = _section(manifest, "exporter").get("checks")
    if isinstance(checks, list) and any(
        isinstance(c, Mapping) and c.get("id") == "foreign_gpu_processes" for c in checks
    ):
        reasons.append("foreign GPU process")
    reasons += [r for r in (_failed(summary, manifest), _host(manifest)) if r]
    return reasons


def latency_only(reasons: list[str]) -> bool:
    """True when the only reasons leave the run's counts trustworthy (failed requests are the count)."""
    return bool(reasons) and all(r.startswith(FAILED) for r in reasons)
