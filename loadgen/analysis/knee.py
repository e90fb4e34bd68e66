"""Where a throughput-latency curve bends: the knee, and the throughput a latency SLA allows.

Knee method (elasticity): for each step between consecutive load points, the elasticity is
ln(T_i / T_{i-1}) / ln(L_i / L_{i-1}) (T throughput, L offered load): 1 means throughput grows in
proportion to load, 0 means it stopped growing. The knee is the last point before the first step
whose elasticity falls below `threshold` (default 0.2) while P99 latency rises. None when
throughput keeps growing across the whole sweep.

Throughput at the SLA: the highest load whose latency statistic meets the objective; when the next
point fails it, load and throughput are linearly interpolated to where latency crosses the limit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from loadgen.analysis.points import Point
from loadgen.analysis.slo import Objective

KNEE_METHOD = (
    "elasticity: the last load before throughput grows by less than {threshold:g}x the relative "
    "load increase (d ln throughput / d ln load < {threshold:g}) while P99 E2E latency rises"
)


@dataclass(frozen=True)
class Knee:
    """The knee point and the elasticity of the step after it."""

    load: float
    run_id: str
    throughput: float
    elasticity_after: float
    method: str


@dataclass(frozen=True)
class SlaThroughput:
    """Highest load and throughput within an objective; `how` says whether measured or interpolated."""

    objective: str
    load: float | None
    request_throughput: float | None
    output_token_throughput: float | None
    # "interpolated" | "measured" | "held at every point" | "not met at any load", and a lower load
    # that missed: "...; not met at lower load X"
    how: str
    between: tuple[str, ...] = ()


def elasticity(prev: Point, cur: Point) -> float | None:
    """d ln(request throughput) / d ln(load) between two points; None when undefined."""
    if prev.load <= 0 or cur.load <= prev.load:
        return None
    if prev.request_throughput <= 0 or cur.request_throughput <= 0:
        return 0.0 if prev.request_throughput > 0 else None
    return math.log(cur.request_throughput / prev.request_throughput) / math.log(cur.load / prev.load)


def _latency_rises(prev: Point, cur: Point) -> bool:
    before, after = prev.stat("e2e_s", "p99"), cur.stat("e2e_s", "p99")
    return before is not None and after is not None and after > before


def find_knee(points: list[Point], threshold: float = 0.2) -> Knee | None:
    """Return the knee of a sweep (points in any order), or None if throughput never flattens."""
    ordered = sorted(points, key=lambda p: p.load)
    for prev, cur in zip(ordered, ordered[1:], strict=False):
        e = elasticity(prev, cur)
        if e is not None and e < threshold and _latency_rises(prev, cur):
            return Knee(
                load=prev.load,
                run_id=prev.run_id,
                throughput=prev.request_throughput,
                elasticity_after=e,
                method=KNEE_METHOD.format(threshold=threshold),
            )
    return None


def _lerp(a: float, b: float, fraction: float) -> float:
    return a + (b - a) * fraction


def _meets(point: Point, objective: Objective) -> bool:
    value = point.stat(objective.summary_key, objective.stat)
    return value is not None and value <= objective.limit_s


def throughput_at_sla(points: list[Point], objective: Objective) -> SlaThroughput:
    """Highest throughput whose latency statistic stays within the objective (see module doc): the
    highest load that meets it, interpolated towards the next load up when that one fails; a lower
    load that missed (a noisy first point) is named in `how`, it does not void the higher ones."""
    ordered = sorted(points, key=lambda p: p.load)
    if not ordered:
        return SlaThroughput(objective.spec(), None, None, None, "no points")
    meeting = [p for p in ordered if _meets(p, objective)]
    if not meeting:
        return SlaThroughput(objective.spec(), None, None, None, "not met at any load")
    last_ok = meeting[-1]
    missed = [p.load for p in ordered if p.load < last_ok.load and not _meets(p, objective)]
    note = f"; not met at lower load {', '.join(f'{x:g}' for x in missed)}" if missed else ""
    point = next((p for p in ordered if p.load > last_ok.load), None)
    if point is None:
        return _measured(
            objective, last_ok, "held at every point" if not missed else "held at the highest load" + note
        )
    value, ok_value = (
        point.stat(objective.summary_key, objective.stat),
        last_ok.stat(objective.summary_key, objective.stat),
    )
    if value is None or ok_value is None or value <= ok_value:
        return _measured(objective, last_ok, "measured" + note)
    fraction = (objective.limit_s - ok_value) / (value - ok_value)
    return SlaThroughput(
        objective=objective.spec(),
        load=_lerp(last_ok.load, point.load, fraction),
        request_throughput=_lerp(last_ok.request_throughput, point.request_throughput, fraction),
        output_token_throughput=_lerp(
            last_ok.output_token_throughput, point.output_token_throughput, fraction
        ),
        how="interpolated" + note,
        between=(last_ok.run_id, point.run_id),
    )


def _measured(objective: Objective, point: Point, how: str) -> SlaThroughput:
    return SlaThroughput(
        objective=objective.spec(),
        load=point.load,
        request_throughput=point.request_throughput,
        output_token_throughput=point.output_token_throughput,
        how=how,
        between=(point.run_id,),
    )
