"""Runs whose own record says they were unreliable (pure): kept out of the check, and said so.

A run is *noisy* when its summary or manifest records that it did not measure the engine alone:
- `client saturated`: loadgen's own core set the pace (summary `client_saturated.saturated`);
- `late`: the client sent requests late (summary `schedule_lag_s.p99` over `max_lag_s`);
- `failed requests`: the failed share is over the run's `config.max_error_rate`: its latencies are
  those of a broken run (the run still counts for the error-rate test, which is about exactly that);
- `foreign GPU process`: the exporter saw another process on the benchmark GPU
  (`exporter.checks` id `foreign_gpu_processes`);
- `host load`: the client host's load (`client.load`, recorded by the run manifest) shows CPU steal
  over `max_steal` or a 1-minute load average over `max_load_per_cpu` per CPU.
The bounds are the suite's `check:` settings (DetectorSettings); 0 turns a bound off.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from loadgen.analysis.changepoint import DetectorSettings
from loadgen.results.manifest_schema import Manifest, read_manifest
from loadgen.results.run_fields import ManifestLike

FAILED = "failed requests"  # the reason that keeps a run in the error-rate test


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _section(record: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = record.get(key)
    return value if isinstance(value, Mapping) else {}


def _failed(summary: Mapping[str, Any], manifest: Manifest) -> str | None:
    limit = _number(manifest.config.get("max_error_rate"))
    share = _number(summary.get("error_rate"))
    if limit is None or share is None or share <= limit:
        return None
    return f"{FAILED} {share:.1%} > limit {limit:.1%}"


def _host(manifest: Manifest, s: DetectorSettings) -> str | None:
    load = manifest.client.load
    steal, per_cpu = _number(load.get("steal_share")), _number(load.get("loadavg_1m_per_cpu"))
    if s.max_steal and steal is not None and steal > s.max_steal:
        return f"host load: CPU steal {steal:.0%} > {s.max_steal:.0%}"
    if s.max_load_per_cpu and per_cpu is not None and per_cpu > s.max_load_per_cpu:
        return f"host load: load average {per_cpu:.1f} per CPU > {s.max_load_per_cpu:g}"
    return None


def noisy_reasons(
    summary: Mapping[str, Any], manifest: ManifestLike, settings: DetectorSettings | None = None
) -> list[str]:
    """Why a run's record says it is unreliable (empty: it is not); the manifest read through the
    one schema."""
    s = settings or DetectorSettings()
    m = read_manifest(manifest)
    reasons = []
    if _section(summary, "client_saturated").get("saturated"):
        reasons.append("client saturated")
    lag = _number(_section(summary, "schedule_lag_s").get("p99"))
    if s.max_lag_s and lag is not None and lag > s.max_lag_s:
        reasons.append(f"late: schedule lag p99 {lag:.2f} s > {s.max_lag_s:g} s")
    if any(c.get("id") == "foreign_gpu_processes" for c in m.exporter.checks):
        reasons.append("foreign GPU process")
    reasons += [r for r in (_failed(summary, m), _host(m, s)) if r]
    return reasons


def latency_only(reasons: list[str]) -> bool:
    """True when the only reasons leave the run's counts trustworthy (failed requests are the count)."""
    return bool(reasons) and all(r.startswith(FAILED) for r in reasons)
