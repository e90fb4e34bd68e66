"""Capacity at a latency SLA, by the seed's procedure (DIGEST item 6).

Start at a low load, raise it by `growth` (default +10%) a step while the objective's statistic
stays below `stop_factor` (default 1.5) times the limit; the first step beyond that ends the ramp.
Then narrow down by bisection between the highest load that met the objective and the lowest load
that missed it, until they are within `resolution`. Bounded by `max_steps` and `max_time_s`.
The result is the highest load that held the SLA, with every step's figures.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from loadgen.analysis.points import Point
from loadgen.analysis.slo import Objective

Measure = Callable[[float], Point]


@dataclass(frozen=True)
class SearchSettings:
    """Knobs of the search; `integer` rounds loads (concurrency) to whole numbers."""

    start: float = 1.0
    growth: float = 1.10
    stop_factor: float = 1.5
    max_steps: int = 30
    max_time_s: float = 600.0
    resolution: float = 1.0
    integer: bool = True
    max_error_rate: float = 0.0


@dataclass(frozen=True)
class Step:
    """One measured step: its load, the objective's value, whether it held, and which phase."""

    index: int
    phase: str  # "ramp" | "narrow"
    load: float
    value: float | None
    met: bool
    point: Point


@dataclass
class CapacityResult:
    """Outcome of a search: the best load that held the objective (None if none did)."""

    objective: Objective
    steps: list[Step] = field(default_factory=list)
    best: Step | None = None
    lowest_miss: Step | None = None
    stop_reason: str = ""

    @property
    def converged(self) -> bool:
        """True when the SLA boundary was bracketed and narrowed to the resolution."""
        return self.stop_reason == "converged"


def next_ramp_load(load: float, settings: SearchSettings) -> float:
    """The next ramp load: +growth, at least +1 when loads are integers."""
    raised = load * settings.growth
    if settings.integer:
        return float(max(int(load) + 1, round(raised)))
    return raised


def _midpoint(low: float, high: float, settings: SearchSettings) -> float | None:
    if high - low <= settings.resolution:
        return None
    mid = (low + high) / 2
    if settings.integer:
        mid = float(round(mid))
        if mid <= low or mid >= high:
            return None
    return mid


class _Search:
    def __init__(
        self, measure: Measure, objective: Objective, settings: SearchSettings, clock: Callable[[], float]
    ) -> None:
        self.measure, self.settings, self.clock = measure, settings, clock
        self.result = CapacityResult(objective=objective)
        self.deadline = clock() + settings.max_time_s

    def out_of_budget(self) -> str | None:
        if len(self.result.steps) >= self.settings.max_steps:
            return "step budget exhausted"
        if self.clock() >= self.deadline:
            return "time budget exhausted"
        return None

    def step(self, load: float, phase: str) -> Step:
        point = self.measure(load)
        value = point.stat(self.result.objective.summary_key, self.result.objective.stat)
        within = value is not None and value <= self.result.objective.limit_s
        met = within and point.error_rate <= self.settings.max_error_rate
        step = Step(len(self.result.steps) + 1, phase, load, value, met, point)
        self.result.steps.append(step)
        res = self.result
        if met and (res.best is None or load > res.best.load):
            res.best = step
        if not met and (res.lowest_miss is None or load < res.lowest_miss.load):
            res.lowest_miss = step
        return step

    def ramp(self) -> str | None:
        load, limit = self.settings.start, self.result.objective.limit_s * self.settings.stop_factor
        while (reason := self.out_of_budget()) is None:
            step = self.step(load, "ramp")
            if step.value is None or step.value > limit or step.point.error_rate > 0.5:
                return None
            load = next_ramp_load(load, self.settings)
        return reason

    def narrow(self) -> str:
        while True:
            res = self.result
            if res.lowest_miss is None:
                return "never missed the objective"
            if res.best is None:
                return "missed the objective at the lowest load"
            mid = _midpoint(res.best.load, res.lowest_miss.load, self.settings)
            if mid is None:
                return "converged"
            if (reason := self.out_of_budget()) is not None:
                return reason
            self.step(mid, "narrow")


def search_capacity(
    measure: Measure,
    objective: Objective,
    settings: SearchSettings | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> CapacityResult:
    """Run the ramp-then-narrow search; `measure(load)` runs one load and returns its Point."""
    search = _Search(measure, objective, settings or SearchSettings(), clock)
    reason = search.ramp()
    search.result.stop_reason = reason or search.narrow()
    return search.result
