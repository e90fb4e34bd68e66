"""bench.scaling's pure helpers: the grid for a core count, the ceilings, TTFT error and token rates."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import pytest

from bench import scaling
from bench.scaling import (
    LAG_LIMIT_MS,
    PLAIN,
    RATES,
    SUSTAINED_SHARE,
    Point,
    ceiling,
    ceiling_lines,
    ingest_rates,
    parse_rates,
    parse_streams,
    parse_workers,
    plan_grid,
    serving_span_s,
    token_rate,
    ttft_errors_ms,
)


def _point(workers: int, asked: float, share: float = 1.0, lag: float = 0.5, busy: float = 0.3) -> Point:
    return Point(workers, asked, asked * share, lag, busy)


def test_too_few_cores_gives_no_grid_unless_small_is_asked() -> None:
    assert plan_grid(4, small=False) is None
    small = plan_grid(2, small=True)
    assert small is not None
    assert small.workers == (PLAIN, 1, 2)


def test_grid_keeps_workers_plus_servers_within_the_cores() -> None:
    for cores in (8, 12, 16, 32):
        grid = plan_grid(cores, small=False)
        assert grid is not None
        assert all(w + 1 + grid.servers <= cores for w in grid.workers)  # + 1: the coordinator's core
    sixteen = plan_grid(16, small=False)
    assert sixteen is not None
    assert sixteen.workers == (PLAIN, 1, 2, 4, 8)
    assert sixteen.servers == 7
    eight = plan_grid(8, small=False)  # 8 workers would leave no core for the coordinator or a server
    assert eight is not None
    assert eight.workers == (PLAIN, 1, 2, 4)
    assert eight.servers == 3
    many = plan_grid(64, small=False)
    assert many is not None
    assert many.servers == 8


def test_rates_override_parses_and_rejects_bad_values() -> None:
    assert parse_rates(None) == RATES
    assert parse_rates("1000,250") == (250, 1000)
    with pytest.raises(ValueError, match="'250,fast'"):
        parse_rates("250,fast")
    with pytest.raises(ValueError, match="'0,100'"):
        parse_rates("0,100")


def test_row_and_stream_selectors_keep_only_what_is_asked_and_name_a_bad_value() -> None:
    grid = plan_grid(16, small=False)
    assert grid is not None
    assert parse_workers(None, grid) is grid
    assert parse_workers("8,plain", grid).workers == (PLAIN, 8)  # the grid's order, not the asked one
    with pytest.raises(ValueError, match="'4,16'.*plain,1,2,4,8"):
        parse_workers("4,16", grid)
    assert parse_streams("none", grid).streams == ()
    assert parse_streams("4000,1000", grid).streams == (1000, 4000)
    with pytest.raises(ValueError, match="'many'"):
        parse_streams("many", grid)


def test_ceiling_is_the_highest_rate_sustained_on_both_conditions() -> None:
    points = [
        _point(1, 500),
        _point(1, 1000, share=SUSTAINED_SHARE - 0.01),  # achieved too low
        _point(2, 500),
        _point(2, 1000),
        _point(2, 2000, lag=LAG_LIMIT_MS),  # lag at the limit is not under it
        _point(4, 500, lag=LAG_LIMIT_MS * 2),  # nothing sustained
    ]
    assert ceiling(points) == {1: 500.0, 2: 1000.0, 4: None}


def test_a_failed_lower_rate_does_not_hide_a_sustained_higher_one() -> None:
    assert ceiling([_point(1, 1000), _point(1, 500, lag=LAG_LIMIT_MS * 3)]) == {1: 1000.0}


def test_ceiling_lines_give_the_ratio_and_flag_a_busy_server() -> None:
    lines = ceiling_lines([_point(1, 500), _point(1, 2000, lag=LAG_LIMIT_MS * 5), _point(2, 1000, busy=0.97)])
    assert lines[0].startswith("ceiling, 1 worker(s): 500 req/s")
    assert "1.00x" in lines[0]
    assert "2.00x" in lines[1]  # 1000 / 500
    assert "server may be the limit" in lines[1]
    assert "server may be" not in lines[0]
    assert "at least" not in lines[1]  # 2000 was asked (by 1 worker): 1000 is not the grid's top


def test_ceilings_are_read_against_the_plain_runs() -> None:
    lines = ceiling_lines([_point(PLAIN, 400), _point(PLAIN, 800, lag=LAG_LIMIT_MS * 2), _point(1, 400)])
    lines += ceiling_lines([_point(PLAIN, 400), _point(2, 800)])[1:]
    assert lines[0].startswith("ceiling, plain run: 400 req/s")
    assert "1.00x the plain-run ceiling" in lines[1]  # 1 worker: 400 / 400
    assert "2.00x the plain-run ceiling" in lines[2]  # 2 workers: 800 / 400


def test_a_ceiling_at_the_grids_top_rate_is_a_lower_bound() -> None:
    lines = ceiling_lines([_point(1, 500), _point(2, 500)])
    assert all("at least 500 req/s" in line for line in lines)


def test_ttft_error_adds_the_start_base_and_joins_by_request_id() -> None:
    base = 7_000_000_000
    lines: list[dict[str, Any]] = [
        {"x_request_id": "a", "first_token_ns": 1_000_000},
        {"x_request_id": "b", "first_token_ns": 3_000_000},
        {"x_request_id": "c", "first_token_ns": None},  # failed: no first token
        {"x_request_id": "z", "first_token_ns": 5_000_000},  # no server record: skipped
    ]
    truth = {"a": [base + 500_000], "b": [base + 1_000_000, base + 9_000_000], "c": [base]}
    # a: (1.0 ms + base) - (base + 0.5 ms) = 0.5 ms; b: 3.0 - 1.0 = 2.0 ms
    assert ttft_errors_ms(lines, base, truth) == [0.5, 2.0]


def test_token_rate_and_serving_span() -> None:
    # 1000 tokens over 0.5 s = 2000 tokens/s
    assert token_rate(1000, 1_000_000_000, 1_500_000_000) == 2000.0
    assert math.isnan(token_rate(10, 5, 5))
    assert serving_span_s({"a": [2_000_000_000, 3_000_000_000], "b": [1_000_000_000], "c": []}) == 2.0
    assert serving_span_s({}) == 0.0


def test_scaling_is_registered_but_not_in_the_default_make_bench_set() -> None:
    from bench.__main__ import BENCHMARKS, DEFAULT

    assert BENCHMARKS["scaling"] == "bench.scaling"
    assert "scaling" not in DEFAULT
    assert set(DEFAULT) <= set(BENCHMARKS)


def test_ingest_rates_from_the_servers_stamps_and_the_clients_lines() -> None:
    truth = {"a": [0, 500_000_000, 1_000_000_000], "b": [250_000_000, 1_000_000_000], "c": []}
    lines: list[dict[str, Any]] = [
        {"first_token_ns": 100, "last_token_ns": 400_000_100, "output_tokens": 3},
        {"first_token_ns": 200_000_100, "last_token_ns": 500_000_100, "output_tokens": 2},
        {"first_token_ns": None, "last_token_ns": None, "output_tokens": 0},  # failed: left out
    ]
    # server: 5 tokens over 1.0 s; client: 5 tokens over 0.5 s
    assert ingest_rates(lines, truth) == (5.0, 10.0)
    assert all(math.isnan(v) for v in ingest_rates([], truth))


def test_the_smt_line_names_cpus_that_share_a_core(tmp_path: Path) -> None:
    for cpu, siblings in enumerate(["0,2", "1,3", "0,2", "1,3"]):
        topo = tmp_path / f"cpu{cpu}" / "topology"
        topo.mkdir(parents=True)
        (topo / "thread_siblings_list").write_text(siblings + "\n")
    assert scaling.smt_line(4, str(tmp_path)) == "SMT siblings 0,2 1,3"
    for cpu in range(4):
        (tmp_path / f"cpu{cpu}" / "topology" / "thread_siblings_list").write_text(f"{cpu}\n")
    assert scaling.smt_line(4, str(tmp_path)) == "no SMT: every CPU is its own core"
    assert "unknown" in scaling.smt_line(5, str(tmp_path))


class NoServers:
    """A server group that starts nothing (rate_point is faked)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __enter__(self) -> NoServers:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


def test_a_point_not_sustained_is_run_again_before_its_row_stops(monkeypatch: pytest.MonkeyPatch) -> None:
    # workers 8: 1,000 noisy twice then fine; 2,000 fails three times; 3,000 is never run
    lags = {(8, 1000): [5.0, 4.0, 0.5], (8, 2000): [5.0, 6.0, 3.0]}
    calls: list[tuple[int, int, int]] = []

    def fake_point(
        servers: Any, workers: int, rate: int, usable: Any, seconds: float, retry: int = 0
    ) -> Point:
        calls.append((workers, rate, retry))
        lag = lags.get((workers, rate), [0.5, 0.5, 0.5])[retry]
        return _point(workers, float(rate), lag=lag)

    monkeypatch.setattr(scaling, "ServerGroup", NoServers)
    monkeypatch.setattr(scaling, "rate_point", fake_point)
    grid = scaling.Grid((8,), (1000, 2000, 3000), (64,), 1, "test")
    points = scaling.rate_grid(grid, [1], [0], 1.0)
    assert calls == [(8, 1000, 0), (8, 1000, 1), (8, 1000, 2), (8, 2000, 0), (8, 2000, 1), (8, 2000, 2)]
    assert ceiling(points) == {8: 1000.0}


def test_the_grid_runs_rate_by_rate_on_every_row_still_going(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[int, int]] = []

    def fake_point(
        servers: Any, workers: int, rate: int, usable: Any, seconds: float, retry: int = 0
    ) -> Point:
        calls.append((workers, rate))
        return _point(workers, float(rate), lag=5.0 if (workers, rate) == (0, 200) else 0.5)

    monkeypatch.setattr(scaling, "ServerGroup", NoServers)
    monkeypatch.setattr(scaling, "rate_point", fake_point)
    grid = scaling.Grid((0, 2), (100, 200, 300), (64,), 1, "test")
    points = scaling.rate_grid(grid, [1], [0], 1.0, tries=1)
    # the plain row (0) fails at 200 and stops; the 2-worker row goes on, rate by rate
    assert calls == [(0, 100), (2, 100), (0, 200), (2, 200), (2, 300)]
    assert ceiling(points) == {0: 100.0, 2: 300.0}


def test_steal_is_read_per_cpu_from_proc_stat() -> None:
    from bench import host_noise

    before = host_noise.cpu_times(
        "cpu  9 0 9 9 0 0 0 0\ncpu0 100 0 50 800 0 0 0 10\ncpu1 10 0 0 90 0 0 0 0\n"
    )
    after = host_noise.cpu_times(
        "cpu  9 0 9 9 0 0 0 0\ncpu0 150 0 60 870 0 0 0 30\ncpu1 20 0 0 190 0 0 0 0\n"
    )
    assert before == {0: (10, 960), 1: (0, 100)}
    assert host_noise.steal_share(before, after, [0]) == pytest.approx(20 / 150)
    assert host_noise.steal_share(before, after, [1]) == 0.0
    assert host_noise.steal_share(before, after, [7]) is None  # a CPU /proc/stat does not list
    assert host_noise.noise_note(20 / 150) == "  steal 13.3%"
    assert host_noise.noise_note(0.0) == host_noise.noise_note(None) == ""


def test_a_retry_waits_for_the_host_timer_to_be_quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    from bench import host_noise

    assert host_noise.timer_overshoot_ms(None, sleeps=5) >= 0.0  # a real probe on this host
    assert host_noise.work_ms(None, repeats=1) > 0.0
    monkeypatch.setattr(time, "sleep", lambda s: None)
    probes = iter([2.0, 1.5, 0.1, 0.1])
    got, _ = host_noise.wait_for_quiet(None, 60.0, probe=lambda core: next(probes))
    assert got == 0.1  # probed until quiet
    loud = iter([2.0] * 1000)
    got, _ = host_noise.wait_for_quiet(None, 0.0, probe=lambda core: next(loud))
    assert got == 2.0  # gave up at the limit, and says how loud it still was
