"""Expand a plan into its runs (phase x engine x parameter variant x workload x load x repetition)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from loadgen.analysis.slo import parse_objective
from loadgen.config import ConfigError, RunConfig
from loadgen.experiments.plantypes import EngineSpec, PhaseSpec, Plan
from loadgen.workload.warmup import warmup_warning

# Experiments default to no linger between runs (set `defaults: {linger: 15s}` when Prometheus
# must scrape each run's last values).
EXPERIMENT_DEFAULTS: dict[str, Any] = {"linger_s": 0.0}


@dataclass(frozen=True)
class RunSpec:
    """One run of an experiment; `key` identifies it across interruptions and resumes."""

    key: str
    phase: str
    phase_kind: str
    engine: str
    variant: str
    params: dict[str, Any]
    workload: str
    load_kind: str
    load: float
    repetition: int
    settings: dict[str, Any] = field(default_factory=dict)

    def point(self) -> dict[str, Any]:
        """The experiment coordinates recorded in the run's manifest."""
        return {
            "phase": self.phase,
            "phase_kind": self.phase_kind,
            "engine": self.engine,
            "variant": self.variant,
            "params": self.params,
            "workload": self.workload,
            self.load_kind: self.load,
            "load_kind": self.load_kind,
            "repetition": self.repetition,
        }


def variants(engine: EngineSpec, phase: PhaseSpec) -> list[tuple[str, dict[str, Any]]]:
    """The engine's own params, then one change at a time for each `vary` value (one-factor design)."""
    base = dict(engine.params)
    out = [("default" if not phase.vary else "base", base)]
    for param, values in phase.vary.items():
        for value in values:
            if base.get(param) != value:
                out.append((f"{param}={_fmt(value)}", {**base, param: value}))
    return out


def _fmt(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def slo_settings(plan: Plan) -> dict[str, Any]:
    """The plan's objectives as the runs' per-request goodput SLO (`e2e_p99=500ms` -> e2e_s 0.5)."""
    slo = {}
    for spec in plan.slo:
        objective = parse_objective(spec)
        if objective.metric in ("ttft", "tpot", "e2e"):
            slo[objective.summary_key] = objective.limit_s
    return {"slo": slo} if slo else {}


def expand(plan: Plan) -> list[RunSpec]:
    """Every run of the plan in execution order."""
    runs = []
    for phase in plan.phases:
        for engine_name in phase.engines:
            engine = plan.engines[engine_name]
            for label, params in variants(engine, phase):
                for workload in phase.workloads:
                    settings = {
                        **EXPERIMENT_DEFAULTS,
                        **slo_settings(plan),
                        **plan.settings,
                        **plan.workloads[workload],
                        **phase.settings,
                    }
                    for rep in range(1, phase.repetitions + 1):
                        for load in phase.loads:
                            key = (
                                f"{phase.name}/{engine_name}/{label}/{workload}/"
                                f"{phase.load_kind}={_fmt(load)}/rep{rep}"
                            )
                            runs.append(
                                RunSpec(
                                    key,
                                    phase.name,
                                    phase.kind,
                                    engine_name,
                                    label,
                                    params,
                                    workload,
                                    phase.load_kind,
                                    load,
                                    rep,
                                    settings,
                                )
                            )
    return runs


def build_config(
    spec: RunSpec,
    *,
    target: str,
    base_url: str,
    results_dir: str,
    experiment_id: str,
    extra_manifest: dict[str, Any],
    api_key: str | None = None,
) -> RunConfig:
    """The RunConfig of one run: plan settings plus the runner's per-run fields (the API key comes
    from the command line's environment, never from the plan file)."""
    load_fields: dict[str, Any] = (
        {"max_concurrency": int(spec.load), "rate": math.inf}
        if spec.load_kind == "concurrency"
        else {"rate": spec.load}
    )
    return RunConfig(
        **{
            **spec.settings,
            **load_fields,
            "target": target,
            "base_url": base_url,
            "results_dir": results_dir,
            "experiment_id": experiment_id,
            "scenario": f"{spec.phase}-{spec.workload}",
            "extra_manifest": extra_manifest,
            "api_key": api_key,
        }
    )


def check_configs(plan: Plan, runs: list[RunSpec]) -> list[str]:
    """Build every run's RunConfig once (without running it) and report the ones that are invalid."""
    problems: list[str] = []
    lines = {phase.name: phase.line for phase in plan.phases}
    for spec in runs:
        try:
            build_config(
                spec,
                target=plan.engines[spec.engine].target,
                base_url="http://127.0.0.1:1",
                results_dir=plan.results_dir,
                experiment_id="check",
                extra_manifest={},
            )
        except (ConfigError, TypeError) as exc:
            message = f"{plan.source}:{lines[spec.phase]}: run {spec.key}: {exc}"
            if message not in problems:
                problems.append(message)
    return problems


def effective_warmup(plan: Plan, spec: RunSpec) -> int:
    """The run's warm-up: its `warmup` setting, at least the engine's `warmup_after_launch`."""
    return max(int(spec.settings.get("warmup") or 0), plan.engines[spec.engine].warmup_after_launch)


def warmup_warnings(plan: Plan, runs: list[RunSpec]) -> list[str]:
    """Concurrency runs whose warm-up is smaller than their concurrency (the start burst measured)."""
    lines = {phase.name: phase.line for phase in plan.phases}
    warnings: list[str] = []
    for spec in runs:
        concurrency = int(spec.load) if spec.load_kind == "concurrency" else None
        text = warmup_warning(effective_warmup(plan, spec), concurrency)
        message = f"{plan.source}:{lines[spec.phase]}: phase {spec.phase!r}: {text}" if text else ""
        if message and message not in warnings:
            warnings.append(message)
    return warnings
