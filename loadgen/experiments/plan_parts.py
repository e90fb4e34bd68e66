"""Validators for the plan's `engines`, `workloads` and `phases` sections."""

from __future__ import annotations

import math
import shlex
from typing import Any

from infergauge import engines
from infergauge import engines as engine_registry
from infergauge.engines import detect_cmdline
from infergauge.engines.base import NEUTRAL_KINDS, NEUTRAL_PARAMS
from infergauge.engines.base import EngineSpec as EngineDescription
from loadgen.config import ConfigError, normalise_keys, target_names
from loadgen.experiments.param_ranges import range_problem
from loadgen.experiments.plancheck import Checker
from loadgen.experiments.plantypes import (
    BUILTIN_WORKLOADS,
    ENGINE_KEYS,
    ENGINE_KINDS,
    PHASE_KEYS,
    PHASE_KINDS,
    EngineSpec,
    PhaseSpec,
)
from loadgen.experiments.yamlnodes import Node
from loadgen.targets import preset_for

WORKLOAD_FIELDS = (
    "workload",
    "dataset",
    "input_len",
    "output_len",
    "profile",
    "shared_prefix_len",
    "shared_prefix_groups",
    "endpoint",
    "ignore_eos",
)


def plan_targets() -> tuple[str, ...]:
    """Targets a plan's engine may name: every --target but the embedded `sim` (a plan launches its own)."""
    return tuple(t for t in target_names() if t != "sim")


def command_argv(node: Node, check: Checker) -> tuple[str, ...]:
    """A launch command from a YAML string (shell-split) or a list of strings."""
    if isinstance(node.value, str) and node.value.strip():
        return tuple(shlex.split(node.value))
    if isinstance(node.value, list) and node.value:
        return tuple(str(item.value) for item in node.value)
    check.bad(node, "command must be a string or a non-empty list")
    return ()


def _family(argv: tuple[str, ...]) -> str | None:
    spec = detect_cmdline(list(argv))[0]
    return spec.name if spec else None


_GENERIC = EngineDescription("generic", "", 0)  # the spec defaults, for an engine outside the registry


def _start_defaults(family: str | None, target: str) -> tuple[str, float]:
    """(readiness path, startup timeout) from the engine spec of the launched engine (or its target)."""
    for name in (family, target):
        if name in engine_registry.ENGINES:
            spec = engine_registry.get(str(name))
            return spec.readiness_path, spec.startup_timeout_s
    return _GENERIC.readiness_path, _GENERIC.startup_timeout_s


def _default_target(name: str, argv: tuple[str, ...], family: str | None) -> str | None:
    if family is not None:
        return preset_for(family, argv)
    return name if name in plan_targets() else None


def _param_ok(key: str, value: Any) -> bool:
    """Whether a neutral parameter's value has the type the engines' flag takes."""
    kind = NEUTRAL_KINDS[key]
    if kind is bool:
        return isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    return isinstance(value, str | int | float) and not isinstance(value, bool)


def check_param(check: Checker, key: str, node: Node) -> None:
    """Report a parameter value of the wrong type or out of range (param_ranges), naming the valid ones."""
    if not _param_ok(key, node.value):
        names = {bool: "true or false", int: "an integer", float: "a number"}
        kind = names.get(NEUTRAL_KINDS[key], "a string")
        check.bad(node, f"invalid {key} {node.value!r}: must be {kind}")
    elif isinstance(node.value, int | float) and not isinstance(node.value, bool):
        problem = range_problem(key, node.value)
        if problem:
            check.bad(node, problem)


def _params(check: Checker, node: Node | None, where: str) -> dict[str, Any]:
    if node is None:
        return {}
    fields = check.mapping(node, where, NEUTRAL_PARAMS)
    for key, value in fields.items():
        check_param(check, key, value)
    return {key: value.plain() for key, value in fields.items()}


def _engine(check: Checker, name: str, node: Node) -> EngineSpec:
    where = f"engine {name!r}"
    m = check.mapping(node, where, ENGINE_KEYS, ("kind",))
    kind = check.choice(m.get("kind"), f"{where} kind", ENGINE_KINDS, "external")
    argv = command_argv(m["command"], check) if "command" in m else ()
    family = _family(argv) if argv else None
    if kind == "launch" and "command" not in m:
        check.bad(node, f"{where}: kind launch needs 'command'")
    if kind == "external":
        for key in ("command", "params", "restart_between_runs", "env", "health_timeout_s"):
            if key in m:
                check.bad(m[key], f"{where}: {key!r} needs kind launch (external engines are not started)")
        if "base_url" not in m:
            check.bad(node, f"{where}: kind external needs 'base_url'")
    params = _params(check, m.get("params"), f"{where} params")
    if params and kind == "launch" and family is None:
        launches = engines.names_text()
        check.bad(m["params"], f"{where}: params need a command that launches {launches}")
    target = m["target"].value if "target" in m else _default_target(name, argv, family)
    choices = ", ".join(plan_targets())
    if target is None:  # nothing to infer it from: neither the name nor a known command says
        check.bad(node, f"{where}: add target: (one of {choices}); its name and command do not say which")
    elif target not in plan_targets():
        check.bad(m.get("target", node), f"{where}: invalid target {target!r}; choose from {choices}")
    base_url = check.text(m.get("base_url"), f"{where} base_url", "http://127.0.0.1:{port}")
    if not base_url.startswith(("http://", "https://")):
        check.bad(m.get("base_url", node), f"{where}: invalid base_url {base_url!r}: must start with http://")
    env = m.get("env")
    health_path, timeout_s = _start_defaults(family, str(target))
    return EngineSpec(
        name=name,
        kind=kind,
        target=str(target),
        base_url=base_url,
        command=argv,
        family=family,
        params=params,
        health_path=check.text(m.get("health_path"), f"{where} health_path", health_path),
        health_timeout_s=check.number(m.get("health_timeout_s"), f"{where} health_timeout_s", timeout_s),
        restart_between_runs=check.flag(m.get("restart_between_runs"), f"{where} restart_between_runs", True),
        flush_cache=check.flag(m.get("flush_cache"), f"{where} flush_cache", True),
        env={str(k): str(v) for k, v in (env.plain() if env and isinstance(env.value, dict) else {}).items()},
        warmup_after_launch=int(
            check.number(m.get("warmup_after_launch"), f"{where} warmup_after_launch", 0, integer=True)
        ),
    )


def build_engines(check: Checker, node: Node | None) -> dict[str, EngineSpec]:
    """The `engines:` mapping, name -> EngineSpec."""
    if node is None:
        return {}
    if not isinstance(node.value, dict) or not node.value:
        check.bad(node, "engines must be a non-empty mapping of name -> engine")
        return {}
    return {name: _engine(check, name, value) for name, value in node.value.items()}


def build_workloads(check: Checker, node: Node | None) -> dict[str, dict[str, Any]]:
    """Built-in profiles plus the plan's own `workloads:` (name -> RunConfig overrides)."""
    out = {name: dict(values) for name, values in BUILTIN_WORKLOADS.items()}
    if node is None:
        return out
    if not isinstance(node.value, dict):
        check.bad(node, "workloads must be a mapping of name -> settings")
        return out
    for name, value in node.value.items():
        fields = check.mapping(value, f"workload {name!r}", WORKLOAD_FIELDS)
        try:
            out[name] = normalise_keys({k: v.plain() for k, v in fields.items()}, f"workload {name!r}")
        except ConfigError as exc:
            check.bad(value, str(exc))
    return out


def _loads(check: Checker, node: Node, kind: str) -> tuple[float, ...]:
    if not isinstance(node.value, list) or not node.value:
        check.bad(node, f"{kind} must be a non-empty list")
        return ()
    out = []
    for item in node.value:
        value = math.inf if kind == "rate" and item.value == "inf" else item.value
        integer = kind == "concurrency"
        good = isinstance(value, int) if integer else isinstance(value, int | float)
        if isinstance(value, bool) or not good or value <= 0:
            what = "positive integers" if integer else "positive numbers (or 'inf')"
            check.bad(item, f"{kind} values must be {what}, got {item.value!r}")
            continue
        out.append(float(value))
    return tuple(out)


def _vary(
    check: Checker, node: Node | None, engines: dict[str, EngineSpec], names: tuple[str, ...], where: str
) -> dict[str, tuple[Any, ...]]:
    if node is None:
        return {}
    out: dict[str, tuple[Any, ...]] = {}
    for key, values in check.mapping(node, f"{where} vary", NEUTRAL_PARAMS).items():
        if not isinstance(values.value, list) or not values.value:
            check.bad(values, f"{where} vary {key!r} must be a non-empty list of values")
            continue
        for item in values.value:
            check_param(check, key, item)
        out[key] = tuple(item.plain() for item in values.value)
    for name in names:
        spec = engines.get(name)
        if spec is not None and (spec.kind != "launch" or spec.family is None):
            check.bad(node, f"{where}: vary needs launched engines with known flags; {name!r} is not")
    return out


def _phase(
    check: Checker, node: Node, engines: dict[str, EngineSpec], workloads: dict[str, dict[str, Any]]
) -> PhaseSpec | None:
    m = check.mapping(node, "phase", PHASE_KEYS, ("name", "kind"))
    name = check.text(m.get("name"), "phase name", "phase")
    where = f"phase {name!r}"
    kind = check.choice(m.get("kind"), f"{where} kind", PHASE_KINDS, "baseline")
    names = check.names(m.get("engines"), "engines", list(engines), list(engines))
    loads_given = [k for k in ("concurrency", "rate") if k in m]
    if len(loads_given) != 1:
        check.bad(node, f"{where} needs exactly one of 'concurrency' or 'rate'")
        return None
    load_kind = loads_given[0]
    reps = check.number(m.get("repetitions"), f"{where} repetitions", 1, integer=True)
    return PhaseSpec(
        name=name,
        kind=kind,
        engines=names,
        workloads=check.names(m.get("workloads"), "workloads", list(workloads), ["medium"]),
        load_kind=load_kind,
        loads=_loads(check, m[load_kind], load_kind),
        repetitions=int(reps),
        vary=_vary(check, m.get("vary"), engines, names, where),
        settings=check.settings(m.get("settings"), f"{where} settings"),
        line=node.line,
    )


def build_phases(
    check: Checker, node: Node | None, engines: dict[str, EngineSpec], workloads: dict[str, dict[str, Any]]
) -> tuple[PhaseSpec, ...]:
    """The `phases:` list; phase names must be unique."""
    if node is None:
        return ()
    if not isinstance(node.value, list) or not node.value:
        check.bad(node, "phases must be a non-empty list")
        return ()
    phases: list[PhaseSpec] = []
    for item in node.value:
        phase = _phase(check, item, engines, workloads)
        if phase is None:
            continue
        if any(p.name == phase.name for p in phases):
            check.bad(item, f"duplicate phase name {phase.name!r}")
        phases.append(phase)
    return tuple(phases)
