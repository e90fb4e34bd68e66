"""Baseline suites (YAML): named series, each one engine x workload x load point, and what to watch.

A suite is validated like an experiment plan (every problem as `FILE:LINE: message`, nothing runs
before the whole file is good) and compiles into one: each series is a `baseline` phase with one
engine, one workload and one load point, so the plan runner's engine launch, restart or cache flush
between series and cache-state recording are reused as they are. See examples/baseline-sim.yaml.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadgen.analysis.changepoint import DetectorSettings
from loadgen.analysis.slo import SloError, parse_objective
from loadgen.baseline.metrics import DEFAULT_METRICS, WATCHED
from loadgen.experiments.expand import check_configs, expand
from loadgen.experiments.plan_parts import build_engines, build_workloads
from loadgen.experiments.plancheck import Checker
from loadgen.experiments.plantypes import PhaseSpec, Plan
from loadgen.experiments.yamlnodes import Node, PlanError, parse_yaml

TOP_KEYS = (
    "name",
    "purpose",
    "results_dir",
    "defaults",
    "slo",
    "engines",
    "workloads",
    "metrics",
    "check",
    "series",
)
SERIES_KEYS = ("name", "engine", "workload", "concurrency", "rate", "slo", "settings")
CHECK_KEYS = tuple(f.name for f in dataclasses.fields(DetectorSettings))
# check settings where 0 turns the thing off (every other one must be positive)
ZERO_MEANS_OFF = frozenset(
    {"confirm_runs", "revise_within", "combined_share", "max_lag_s", "max_steal", "max_load_per_cpu"}
)


@dataclass(frozen=True)
class Suite:
    """A validated suite: its name, the plan it runs as, the figures watched and the check's settings."""

    name: str
    plan: Plan
    metrics: tuple[str, ...]
    detector: DetectorSettings
    source: str = ""

    @property
    def series(self) -> tuple[str, ...]:
        """The series' names, in run order."""
        return tuple(phase.name for phase in self.plan.phases)


def load_suite(path: str | Path) -> Suite:
    """Read and validate a suite file; raises PlanError listing every problem with its line."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise PlanError([f"{path}: cannot read suite: {exc.strerror}"]) from None
    return parse_suite(text, str(path))


def parse_suite(text: str, source: str = "baseline.yaml") -> Suite:
    """Validate suite text (see load_suite)."""
    check = Checker(source)
    top = check.mapping(parse_yaml(text, source), "the suite", TOP_KEYS, ("name", "engines", "series"))
    name = check.text(top.get("name"), "name", "baseline")
    engines = build_engines(check, top.get("engines"))
    workloads = build_workloads(check, top.get("workloads"))
    plan = Plan(
        name=name,
        purpose=check.text(top.get("purpose"), "purpose", ""),
        results_dir=check.text(top.get("results_dir"), "results_dir", "results"),
        on_engine_failure="continue",
        settings=check.settings(top.get("defaults"), "defaults"),
        slo=_slo(check, top.get("slo")),
        engines=engines,
        workloads=workloads,
        phases=_all_series(check, top.get("series"), list(engines), list(workloads)),
        source=source,
    )
    suite = Suite(name, plan, _metrics(check, top.get("metrics")), _detector(check, top.get("check")), source)
    if check.problems:
        raise PlanError(check.problems)
    problems = check_configs(plan, expand(plan))
    if problems:
        raise PlanError(problems)
    return suite


def _slo(check: Checker, node: Node | None) -> tuple[str, ...]:
    if node is None:
        return ()
    out = []
    for item in node.value if isinstance(node.value, list) else [node]:
        try:
            out.append(parse_objective(str(item.value)).spec())
        except SloError as exc:
            check.bad(item, str(exc))
    return tuple(out)


def _all_series(
    check: Checker, node: Node | None, engines: list[str], workloads: list[str]
) -> tuple[PhaseSpec, ...]:
    if node is None:
        return ()
    if not isinstance(node.value, list) or not node.value:
        check.bad(node, "series must be a non-empty list")
        return ()
    out: list[PhaseSpec] = []
    for item in node.value:
        series = _series(check, item, engines, workloads)
        if series is not None and any(s.name == series.name for s in out):
            check.bad(item, f"duplicate series name {series.name!r}")
        elif series is not None:
            out.append(series)
    return tuple(out)


def _series(check: Checker, node: Node, engines: list[str], workloads: list[str]) -> PhaseSpec | None:
    m = check.mapping(node, "series", SERIES_KEYS, ("name", "engine"))
    name = check.text(m.get("name"), "series name", "series")
    where = f"series {name!r}"
    engine = check.names(_listed(m.get("engine")), "engines", engines, [])
    workload = check.names(_listed(m.get("workload")), "workloads", workloads, ["medium"])
    loads = [k for k in ("concurrency", "rate") if k in m]
    if len(loads) != 1:
        check.bad(node, f"{where} needs exactly one load point: 'concurrency' or 'rate'")
        return None
    load = check.number(m[loads[0]], f"{where} {loads[0]}", 1.0, integer=loads[0] == "concurrency")
    settings = check.settings(m.get("settings"), f"{where} settings")
    objectives = _slo(check, m.get("slo"))
    if objectives:
        settings["slo"] = {
            o.summary_key: o.limit_s
            for o in map(parse_objective, objectives)
            if o.metric in ("ttft", "tpot", "e2e")
        }
    return PhaseSpec(name, "baseline", engine, workload, loads[0], (load,), 1, {}, settings, node.line)


def _listed(node: Node | None) -> Node | None:
    """A single name as the one-item list Checker.names reads."""
    return None if node is None else Node([node], node.line)


def _metrics(check: Checker, node: Node | None) -> tuple[str, ...]:
    return check.names(node, "metrics", list(WATCHED), list(DEFAULT_METRICS))


def _detector(check: Checker, node: Node | None) -> DetectorSettings:
    if node is None:
        return DetectorSettings()
    values: dict[str, Any] = {}
    defaults = DetectorSettings()
    for key, item in check.mapping(node, "check", CHECK_KEYS).items():
        integer = isinstance(getattr(defaults, key), int)
        if key in ZERO_MEANS_OFF and item.value == 0 and not isinstance(item.value, bool):
            values[key] = 0 if integer else 0.0
            continue
        number = check.number(item, f"check {key}", float(getattr(defaults, key)), integer=integer)
        if key == "combined_share" and number > 1:
            check.bad(item, f"check combined_share must be at most 1 (a share of alpha), got {number!r}")
        values[key] = int(number) if integer else number
    return dataclasses.replace(defaults, **values)
