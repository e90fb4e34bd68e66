"""The seed's capacity search (ramp +10% until P99 > 1.5x target, then narrow) on a known curve."""

from __future__ import annotations

import itertools

from loadgen.analysis.capacity import SearchSettings, next_ramp_load, search_capacity
from loadgen.analysis.points import Point
from loadgen.analysis.slo import parse_objective


def _measure_linear(loads: list[float]):
    # TTFT p99 = 20 ms per unit of load: the 300 ms objective holds up to load 15 exactly.
    def measure(load: float) -> Point:
        loads.append(load)
        return Point(
            load=load,
            kind="concurrency",
            run_id=f"r{load:g}",
            request_throughput=load,
            output_token_throughput=0.0,
            total_token_throughput=0.0,
            goodput=None,
            error_rate=0.0,
            failed=0,
            partial=False,
            latency={"ttft_s": {"p99": 0.02 * load}},
        )

    return measure


def test_ramp_grows_ten_percent_with_integer_floor():
    settings = SearchSettings()
    assert next_ramp_load(1, settings) == 2
    assert next_ramp_load(20, settings) == 22
    assert next_ramp_load(2.0, SearchSettings(integer=False)) == 2.2


def test_search_converges_on_the_boundary():
    loads: list[float] = []
    result = search_capacity(
        _measure_linear(loads), parse_objective("ttft_p99=300ms"), SearchSettings(start=4, max_steps=40)
    )
    assert result.converged
    assert result.best is not None
    assert result.best.load == 15
    assert result.lowest_miss is not None
    assert result.lowest_miss.load == 16
    # the ramp stopped at the first load beyond 1.5 x 300 ms = 450 ms (load > 22.5)
    ramp = [s.load for s in result.steps if s.phase == "ramp"]
    assert ramp[-1] > 22.5
    assert all(load <= 22.5 for load in ramp[:-1])
    assert [s.load for s in result.steps] == loads


def test_coarse_ramp_is_narrowed_by_bisection():
    loads: list[float] = []
    result = search_capacity(
        _measure_linear(loads), parse_objective("ttft_p99=300ms"), SearchSettings(start=2, growth=2.0)
    )
    # ramp 2, 4, 8, 16, 32 (640 ms > 450 ms stops it); narrow between 8 and 16: 12, 14, 15
    assert loads == [2, 4, 8, 16, 32, 12, 14, 15]
    assert result.converged
    assert result.best is not None
    assert result.best.load == 15
    assert [s.phase for s in result.steps].count("narrow") == 3


def test_search_is_bounded_in_steps_and_time():
    result = search_capacity(
        _measure_linear([]), parse_objective("ttft_p99=300ms"), SearchSettings(start=1, max_steps=3)
    )
    assert len(result.steps) == 3
    assert result.stop_reason == "step budget exhausted"
    ticks = itertools.count(0, 10)  # every clock read advances 10 s
    timed = search_capacity(
        _measure_linear([]),
        parse_objective("ttft_p99=300ms"),
        SearchSettings(start=1, max_time_s=25),
        clock=lambda: float(next(ticks)),
    )
    assert timed.stop_reason == "time budget exhausted"
    assert len(timed.steps) < 5


def test_missed_at_lowest_load():
    result = search_capacity(_measure_linear([]), parse_objective("ttft_p99=10ms"), SearchSettings(start=4))
    assert result.best is None
    assert result.stop_reason == "missed the objective at the lowest load"
