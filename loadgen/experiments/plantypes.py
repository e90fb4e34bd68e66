"""Typed experiment plan: engines, phases and the plan itself (validated by plan.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

PHASE_KINDS = ("baseline", "sensitivity", "scenario")
ENGINE_KINDS = ("launch", "external")
# relaunch: a launched engine found dead before a run is started again (once per engine group), then
# as fail; fail (older name: continue): the rest of that engine's runs fail, the plan goes on; stop
ON_FAILURE = ("relaunch", "fail", "continue", "stop")
# The seed's length profiles plus a long-tailed and a shared-prefix load (RunConfig overrides).
BUILTIN_WORKLOADS: dict[str, dict[str, Any]] = {
    "short": {"profile": "short"},
    "medium": {"profile": "medium"},
    "long": {"profile": "long"},
    "long-tail": {"input_len": "lognormal:512,1.0", "output_len": "lognormal:128,0.8"},
    "shared-prefix": {"workload": "shared-prefix", "profile": "medium"},
}
# RunConfig fields a plan may not set in `defaults`/phases: the runner decides them per run.
RUNNER_FIELDS = (
    "target",
    "base_url",
    "rate",
    "max_concurrency",
    "experiment_id",
    "extra_manifest",
    "results_dir",
    "api_key",
    "grafana_token",
    "scenario",
)
TOP_KEYS = (
    "name",
    "purpose",
    "results_dir",
    "on_engine_failure",
    "defaults",
    "slo",
    "engines",
    "workloads",
    "phases",
)
ENGINE_KEYS = (
    "kind",
    "target",
    "base_url",
    "command",
    "params",
    "health_path",
    "health_timeout_s",
    "restart_between_runs",
    "flush_cache",
    "env",
    "warmup_after_launch",
)
PHASE_KEYS = (
    "name",
    "kind",
    "engines",
    "workloads",
    "concurrency",
    "rate",
    "repetitions",
    "vary",
    "settings",
)


@dataclass(frozen=True)
class EngineSpec:
    """One engine of the plan; `family` is vllm/sglang/simengine for launched engines' flags."""

    name: str
    kind: str
    target: str
    base_url: str | None
    command: tuple[str, ...] = ()
    family: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    health_path: str = "/health"
    health_timeout_s: float = 120.0
    restart_between_runs: bool = True
    flush_cache: bool = True
    env: dict[str, str] = field(default_factory=dict)
    warmup_after_launch: int = 0  # warm-up requests of a run right after a launch or a flush


@dataclass(frozen=True)
class PhaseSpec:
    """One phase: which engines, workloads, loads, repetitions, and parameter variations."""

    name: str
    kind: str
    engines: tuple[str, ...]
    workloads: tuple[str, ...]
    load_kind: str
    loads: tuple[float, ...]
    repetitions: int = 1
    vary: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    line: int = 0


@dataclass(frozen=True)
class Plan:
    """A validated experiment plan."""

    name: str
    purpose: str
    results_dir: str
    on_engine_failure: str
    settings: dict[str, Any]
    slo: tuple[str, ...]
    engines: dict[str, EngineSpec]
    workloads: dict[str, dict[str, Any]]
    phases: tuple[PhaseSpec, ...]
    source: str = ""
