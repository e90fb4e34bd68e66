"""Experiment plans (YAML): schema, validation with line numbers, and the typed plan.

A plan names engines (each `external` at a URL or `launch`ed from a command), workload profiles
and phases (baseline / sensitivity / scenario) with concurrency or rate lists and repetitions.
Everything is checked before anything runs; every problem is reported as `FILE:LINE: message`.
See examples/*.yaml and the README's "Experiment plans" section for the full key list.
"""

from __future__ import annotations

from pathlib import Path

from loadgen.analysis.slo import SloError, parse_objective
from loadgen.experiments.expand import check_configs, expand
from loadgen.experiments.plan_parts import build_engines, build_phases, build_workloads
from loadgen.experiments.plancheck import Checker
from loadgen.experiments.plantypes import ON_FAILURE, TOP_KEYS, Plan
from loadgen.experiments.yamlnodes import Node, PlanError, parse_yaml


def load_plan(path: str | Path) -> Plan:
    """Read and validate a plan file; raises PlanError listing every problem with its line."""
    source = str(path)
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise PlanError([f"{source}: cannot read plan: {exc.strerror}"]) from None
    return parse_plan(text, source)


def parse_plan(text: str, source: str = "plan.yaml") -> Plan:
    """Validate plan text (see load_plan)."""
    check = Checker(source)
    root = parse_yaml(text, source)
    top = check.mapping(root, "the plan", TOP_KEYS, ("name", "engines", "phases"))
    slo = _slo(check, top.get("slo"))
    engines = build_engines(check, top.get("engines"))
    workloads = build_workloads(check, top.get("workloads"))
    phases = build_phases(check, top.get("phases"), engines, workloads)
    plan = Plan(
        name=check.text(top.get("name"), "name", "experiment"),
        purpose=check.text(top.get("purpose"), "purpose", ""),
        results_dir=check.text(top.get("results_dir"), "results_dir", "results"),
        on_engine_failure=check.choice(
            top.get("on_engine_failure"), "on_engine_failure", ON_FAILURE, "relaunch"
        ),
        settings=check.settings(top.get("defaults"), "defaults"),
        slo=slo,
        engines=engines,
        workloads=workloads,
        phases=phases,
        source=source,
    )
    if check.problems:
        raise PlanError(check.problems)
    problems = check_configs(plan, expand(plan))
    if problems:
        raise PlanError(problems)
    return plan


def _slo(check: Checker, node: Node | None) -> tuple[str, ...]:
    if node is None:
        return ()
    items = node.value if isinstance(node.value, list) else [node]
    out = []
    for item in items:
        try:
            out.append(parse_objective(str(item.value)).spec())
        except SloError as exc:
            check.bad(item, str(exc))
    return tuple(out)


__all__ = ["Plan", "PlanError", "load_plan", "parse_plan"]
