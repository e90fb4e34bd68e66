"""Knee detection and throughput at an SLA on synthetic curves whose shape is known."""

from __future__ import annotations

import pytest

from loadgen.analysis.knee import elasticity, find_knee, throughput_at_sla
from loadgen.analysis.points import Point, point_from_summary
from loadgen.analysis.slo import SloError, parse_objective


def _point(load: float, rps: float, p99: float) -> Point:
    return Point(
        load=load,
        kind="concurrency",
        run_id=f"r{load:g}",
        request_throughput=rps,
        output_token_throughput=rps * 100,
        total_token_throughput=rps * 200,
        goodput=None,
        error_rate=0.0,
        failed=0,
        partial=False,
        latency={"e2e_s": {"p99": p99, "p50": p99 / 2}, "ttft_s": {"p99": p99 / 10}},
    )


def _capped_curve(cap: int) -> list[Point]:
    # A server that runs at most `cap` requests at once, 1 s each: throughput = min(c, cap) req/s,
    # and beyond the cap requests queue, so latency grows as c / cap.
    return [_point(c, min(c, cap), max(1.0, c / cap)) for c in (1, 2, 4, 8, 16, 32)]


def test_knee_is_the_concurrency_cap():
    knee = find_knee(_capped_curve(8))
    assert knee is not None
    assert knee.load == 8
    assert knee.elasticity_after == pytest.approx(0.0)
    assert "elasticity" in knee.method


def test_no_knee_while_throughput_keeps_growing():
    assert find_knee(_capped_curve(64)) is None


def test_elasticity_of_proportional_growth_is_one():
    # ln(4/2) / ln(4/2) = 1
    assert elasticity(_point(2, 2, 1), _point(4, 4, 1)) == pytest.approx(1.0)


def test_sla_throughput_is_interpolated_between_points():
    # e2e p99 is 1.0 s at c=8 (8 req/s) and 2.0 s at c=16 (8 req/s); a 1.5 s limit is halfway.
    points = [_point(4, 4, 1.0), _point(8, 8, 1.0), _point(16, 12, 2.0)]
    sla = throughput_at_sla(points, parse_objective("e2e_p99=1500ms"))
    assert sla.how == "interpolated"
    assert sla.load == pytest.approx(12.0)
    assert sla.request_throughput == pytest.approx(10.0)
    assert sla.output_token_throughput == pytest.approx(1000.0)
    assert sla.between == ("r8", "r16")


def test_sla_held_everywhere_and_never_met():
    points = _capped_curve(8)
    held = throughput_at_sla(points, parse_objective("e2e_p99=10s"))
    assert (held.how, held.load, held.request_throughput) == ("held at every point", 32, 8)
    never = throughput_at_sla(points, parse_objective("e2e_p99=100ms"))
    assert never.how == "not met at any load"
    assert never.request_throughput is None


def test_parse_objective_units_and_errors():
    assert parse_objective("ttft_p99=300ms").limit_s == pytest.approx(0.3)
    assert parse_objective("e2e_p50=2s").limit_s == pytest.approx(2.0)
    assert parse_objective("tpot_p90=500us").limit_s == pytest.approx(0.0005)
    with pytest.raises(SloError, match="'latency'.*ttft"):
        parse_objective("latency_p99=1s")
    with pytest.raises(SloError, match="'p42'"):
        parse_objective("ttft_p42=1s")
    with pytest.raises(SloError, match="expected"):
        parse_objective("ttft=1s")


def test_point_from_summary_reads_contract_fields():
    summary = {
        "run_id": "x",
        "request_throughput": 3.5,
        "output_token_throughput": 350.0,
        "total_token_throughput": 700.0,
        "goodput": 3.0,
        "error_rate": 0.0,
        "requests": {"failed": 0},
        "ttft_s": {"p99": 0.25, "count": 10},
    }
    point = point_from_summary(summary, 8, "concurrency")
    assert point.stat("ttft_s", "p99") == 0.25
    assert point.stat("e2e_s", "p99") is None
    assert (point.request_throughput, point.goodput, point.load) == (3.5, 3.0, 8.0)


def test_repetitions_at_one_load_are_averaged():
    from loadgen.analysis.points import mean_point

    merged = mean_point([_point(8, 8.0, 1.0), _point(8, 10.0, 2.0)])
    # (8 + 10) / 2 = 9 req/s; p99 (1 + 2) / 2 = 1.5 s
    assert merged.request_throughput == pytest.approx(9.0)
    assert merged.stat("e2e_s", "p99") == pytest.approx(1.5)
    assert merged.run_id == "r8+r8"
