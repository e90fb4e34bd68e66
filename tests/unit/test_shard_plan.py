"""Shard slices, their flags, the concurrency split and the workers' summed /metrics (pure parts)."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from loadgen.cli.shard_options import shard_plan, worker_count
from loadgen.config import ConfigError, RunConfig
from loadgen.run.live_metrics import RunLabels
from loadgen.run.metrics_sum import combine
from loadgen.scale.workers import concurrency_shares
from loadgen.workload.generator import build_workload, fingerprint
from loadgen.workload.schedule import build_schedule
from loadgen.workload.shard import (
    ShardPlan,
    derived_run_id,
    parse_shard,
    parse_start_at,
    perf_base,
    sequence_fingerprints,
    shard_from_env,
)
from tests.metrics_support import observed


@pytest.mark.parametrize("count", [1, 3, 4, 7])
def test_slices_union_is_the_whole_schedule_index_for_index(count: int) -> None:
    config = RunConfig(num_prompts=50, rate=20.0, seed=3)
    schedule = build_schedule(config)
    got = sorted(
        (k, offset)
        for i in range(count)
        for k, offset in zip(
            ShardPlan(i, count).indices(len(schedule)), ShardPlan(i, count).take(schedule), strict=True
        )
    )
    assert got == list(enumerate(schedule))


def test_slices_fingerprints_join_to_the_single_process_one() -> None:
    config = RunConfig(num_prompts=30, profile="short", seed=5)
    workload = build_workload(config)
    by_index = {k: workload.request(k) for i in range(3) for k in ShardPlan(i, 3).indices(30)}
    assert fingerprint(by_index[k] for k in range(30)) == fingerprint(workload.request(k) for k in range(30))


@pytest.mark.parametrize("text", ["3/3", "-1/2", "1", "a/b", "0/0", "1/2/3"])
def test_a_bad_shard_is_one_line_naming_it(text: str) -> None:
    with pytest.raises(ConfigError, match=f"invalid --shard '{text}'"):
        parse_shard(text)


def test_shard_from_env_reads_the_job_completion_index() -> None:
    assert shard_from_env({"JOB_COMPLETION_INDEX": "2"}, 4) == (2, 4)
    with pytest.raises(ConfigError, match="JOB_COMPLETION_INDEX is not set"):
        shard_from_env({}, 4)
    with pytest.raises(ConfigError, match="needs --shards N"):
        shard_from_env({"JOB_COMPLETION_INDEX": "0"}, None)


@pytest.mark.parametrize(
    ("text", "message"),
    [("tomorrow", "invalid --start-at 'tomorrow'"), ("2026-12-01T02:00:00", "give the zone")],
)
def test_a_bad_start_is_refused(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_start_at(text)


def test_start_at_maps_to_the_perf_counter_through_the_wall_clock() -> None:
    ahead = datetime.fromtimestamp(time.time() + 2.0, UTC)
    # base - now(perf) = start - now(wall) = about 2 s
    assert (perf_base(ahead) - time.perf_counter_ns()) / 1e9 == pytest.approx(2.0, abs=0.05)


def test_shards_derive_one_run_id_and_another_workload_another() -> None:
    start = parse_start_at("2026-12-01T02:00:00Z")
    one = derived_run_id(start, 42, {"name": "random"})
    assert one == derived_run_id(start, 42, {"name": "random"})
    assert one.startswith("20261201T020000Z-")
    assert one != derived_run_id(start, 43, {"name": "random"})


def test_flags_resolve_to_a_plan() -> None:
    plan = shard_plan({"shard": "1/3", "start_at": "2026-12-01T02:00:00Z", "run_id": "r1"}, {})
    assert plan == ShardPlan(1, 3, parse_start_at("2026-12-01T02:00:00Z"), "r1")
    with pytest.raises(ConfigError, match="invalid --run-id '../x'"):
        shard_plan({"shard": "0/2", "run_id": "../x"}, {})
    with pytest.raises(ConfigError, match="go with --shard"):
        shard_plan({"start_at": "2026-12-01T02:00:00Z"}, {})


def test_worker_count() -> None:
    assert worker_count("3") == 3
    assert worker_count("auto") >= 1
    with pytest.raises(ConfigError, match="invalid --workers '0'"):
        worker_count("0")


@pytest.mark.parametrize(
    ("total", "workers", "shares"), [(10, 4, [3, 3, 2, 2]), (4, 4, [1, 1, 1, 1]), (None, 2, [None, None])]
)
def test_max_concurrency_is_split_in_total(total: int | None, workers: int, shares: list[int | None]) -> None:
    assert concurrency_shares(total, workers) == shares


def test_max_concurrency_below_the_workers_is_refused() -> None:
    with pytest.raises(ConfigError, match="invalid --max-concurrency 2: below --workers 3"):
        concurrency_shares(2, 3)


def _worker(ttfts: list[float], in_flight: int, ended: float) -> str:
    metrics = observed(RunLabels("r", "sim", "m", "s"), ttfts)
    metrics.in_flight.set(in_flight)
    metrics.end_ts.set(ended)
    return generate_latest(metrics.registry).decode()


def _value(families: list, name: str, **labels: str) -> float:
    registry = CollectorRegistry()
    registry.register(type("C", (), {"collect": lambda self: families, "describe": lambda self: []})())
    value = registry.get_sample_value(
        name, {"run_id": "r", "target": "sim", "model": "m", "scenario": "s", **labels}
    )
    assert value is not None
    return value


def test_summed_metrics_add_counts_and_buckets_without_a_worker_label() -> None:
    summed = combine([_worker([0.01, 0.02], 2, 0.0), _worker([0.05], 1, 0.0)])
    assert _value(summed, "loadgen_requests_total", outcome="ok") == 3
    assert _value(summed, "loadgen_time_to_first_token_seconds_count") == 3
    assert _value(summed, "loadgen_time_to_first_token_seconds_bucket", le="+Inf") == 3
    assert _value(summed, "loadgen_in_flight_requests") == 3


def test_summed_run_end_stays_zero_until_every_worker_ended() -> None:
    assert (
        _value(combine([_worker([], 0, 100.0), _worker([], 0, 0.0)]), "loadgen_run_end_timestamp_seconds")
        == 0
    )
    assert (
        _value(combine([_worker([], 0, 100.0), _worker([], 0, 105.0)]), "loadgen_run_end_timestamp_seconds")
        == 105
    )


@pytest.mark.parametrize("profile", ["short", "long"])
def test_one_pass_fingerprints_are_the_generators(profile: str) -> None:
    workload = build_workload(RunConfig(num_prompts=20, profile=profile, seed=9))
    plan = ShardPlan(1, 3)
    assert sequence_fingerprints(plan, workload, 20) == (
        fingerprint(workload.request(k) for k in range(20)),
        fingerprint(workload.request(k) for k in plan.indices(20)),
    )
