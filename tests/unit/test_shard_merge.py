"""The merge's pure part on hand-made shard records: one time base across hosts, the checks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from loadgen.results.merge import merge, rebased
from loadgen.results.shard_record import MergeError, ShardRecord
from loadgen.workload.shard import schedule_fingerprint

NS = 1_000_000_000
OFFSETS = [0, 100_000_000, 200_000_000, 300_000_000]  # the run's schedule: 4 requests, 0.1 s apart


def line(index: int, base_ns: int) -> dict[str, Any]:
    """Request `index` sent on time by a host whose start is perf_counter `base_ns`; TTFT 20 ms."""
    sent = base_ns + OFFSETS[index]
    return {
        "index": index,
        "x_request_id": f"r-{index}",
        "warmup": False,
        "outcome": "ok",
        "error": None,
        "http_status": 200,
        "scheduled_s": OFFSETS[index] / NS,
        "sent_s": OFFSETS[index] / NS,
        "first_token_s": (OFFSETS[index] + 20_000_000) / NS,
        "last_token_s": (OFFSETS[index] + 50_000_000) / NS,
        "done_s": (OFFSETS[index] + 50_000_000) / NS,
        "due_s": OFFSETS[index] / NS,
        "schedule_lag_s": 0.0,
        "slot_wait_s": 0.0,
        "ttft_s": 0.02,
        "tpot_s": 0.03,
        "e2e_s": 0.05,
        "input_len": 4,
        "prompt_tokens": 4,
        "output_len": 2,
        "output_tokens": 2,
        "token_count": "usage",
        "sent_ns": sent,
        "first_token_ns": sent + 20_000_000,
        "last_token_ns": sent + 50_000_000,
        "itl_s": [0.03],
    }


def shard(index: int, base_ns: int, fingerprint: str = "sha256:run") -> ShardRecord:
    mine = [k for k in range(4) if k % 2 == index]
    manifest = {
        "run_id": "r",
        "partial": False,
        "started_at": "2026-12-01T02:00:00.000Z",
        "ended_at": "2026-12-01T02:00:01.000Z",
        "config": {"max_concurrency": 2, "slo": {}},
        "workload": {"definition_fingerprint": "sha256:def"},
        "shard": {
            "index": index,
            "count": 2,
            "assignment": "round-robin",
            "start_at": "2026-12-01T02:00:00Z",
            "run_num_requests": 4,
            "run_fingerprint": fingerprint,
            "run_schedule_fingerprint": schedule_fingerprint(OFFSETS),
            "slice_num_requests": len(mine),
        },
    }
    summary = {"run_id": "r", "started_at": manifest["started_at"], "ended_at": manifest["ended_at"]}
    return ShardRecord(Path(f"shard-{index}"), manifest, summary, [line(k, base_ns) for k in mine])


def test_rebased_times_count_from_the_common_start() -> None:
    moved = rebased(line(3, base_ns=7 * NS))
    # sent 0.3 s after the start: 300 ms; first token 20 ms later
    assert (moved["sent_ns"], moved["first_token_ns"]) == (300_000_000, 320_000_000)


def test_hosts_with_other_perf_counters_merge_into_one_timeline() -> None:
    merged = merge([shard(0, base_ns=5 * NS), shard(1, base_ns=900 * NS)])
    # window: first send 0 s to last end 0.3 + 0.05 s; 4 requests over 0.35 s
    assert merged.summary["duration_s"] == pytest.approx(0.35)
    assert merged.summary["achieved_rate"] == pytest.approx(3 / 0.3)  # (n - 1) / send span
    assert merged.summary["max_concurrency"] == 4
    assert merged.manifest["workload"]["schedule_fingerprint"] == schedule_fingerprint(OFFSETS)
    assert merged.manifest["workload"]["fingerprint"] == "sha256:run"


def test_another_runs_fingerprint_is_refused() -> None:
    with pytest.raises(MergeError, match="run fingerprint 'sha256:other'.*not one run"):
        merge([shard(0, NS), shard(1, NS, fingerprint="sha256:other")])


def test_a_request_outside_its_slice_is_refused() -> None:
    stray = shard(1, NS)
    stray.lines.append(line(2, NS))  # request 2 belongs to shard 0
    with pytest.raises(MergeError, match="request 2 is not in shard 1's slice"):
        merge([shard(0, NS), stray])


def test_a_shard_that_sent_less_than_its_slice_makes_the_run_partial() -> None:
    short = shard(1, NS)
    short.lines.pop()
    merged = merge([shard(0, NS), short])
    assert merged.summary["partial_reason"] == "shards not whole: 1 sent 1 of its 2 requests"
    assert merged.manifest["workload"]["fingerprint"] is None


def _saturation(saturated_s: float, peak: int) -> dict[str, Any]:
    return {
        "saturated": saturated_s > 0,
        "saturated_s": saturated_s,
        "episodes": int(saturated_s > 0),
        "peak_backlog_requests": peak,
        "peak_backlog_mb": peak / 10,
        "bound_requests": 512,
        "bound_mb": 32.0,
    }


def test_a_saturated_shard_makes_the_merged_run_client_saturated() -> None:
    calm, busy = shard(0, base_ns=5 * NS), shard(1, base_ns=900 * NS)
    calm.summary["client_saturated"] = _saturation(0.0, 40)
    busy.summary["client_saturated"] = _saturation(2.5, 700)
    sat = merge([calm, busy]).summary["client_saturated"]
    assert sat["saturated"] is True
    assert (sat["saturated_s"], sat["peak_backlog_requests"], sat["episodes"]) == (2.5, 700, 1)
    assert sat["shards"] == {"0": calm.summary["client_saturated"], "1": busy.summary["client_saturated"]}


def test_shards_without_saturation_figures_merge_without_them() -> None:
    merged = merge([shard(0, base_ns=5 * NS), shard(1, base_ns=900 * NS)])
    assert "client_saturated" not in merged.summary


def test_the_merged_client_cpu_adds_up_the_workers_and_keeps_each_one_s() -> None:
    a, b = shard(0, base_ns=5 * NS), shard(1, base_ns=900 * NS)
    a.summary["client_cpu"] = {"load_s": 1.0, "load_ms_per_request": 0.5, "load_cores": 0.25, "total_s": 1.2,
                               "requests": 2000}  # fmt: skip
    b.summary["client_cpu"] = {"load_s": 3.0, "load_ms_per_request": 1.5, "load_cores": 0.75, "total_s": 3.3,
                               "requests": 2000}  # fmt: skip
    cpu = merge([a, b]).summary["client_cpu"]
    assert (cpu["load_s"], cpu["load_cores"], cpu["requests"]) == (4.0, 1.0, 4000)
    assert cpu["load_ms_per_request"] == pytest.approx(1.0)
    assert cpu["total_s"] == pytest.approx(4.5)
    assert cpu["shards"] == {"0": a.summary["client_cpu"], "1": b.summary["client_cpu"]}
    assert "client_cpu" not in merge([shard(0, base_ns=5 * NS), shard(1, base_ns=900 * NS)]).summary


def test_merged_cache_facts_are_the_reported_tokens_of_every_shard_not_shard_0s_counters() -> None:
    shards = [shard(0, 5 * NS), shard(1, 9 * NS)]
    shards[0].manifest["cache"] = {"flushed": True, "method": "restart", "detail": "", "hit_ratio": 0.9}
    for s in shards:
        for x in s.lines:
            x["cached_tokens"] = 2 if x["index"] >= 2 else 0  # requests 2 and 3 hit 2 of their 4 tokens
    merged = merge(shards)
    reported = merged.summary["cache"]["reported"]
    assert reported["requests_with_details"] == 4
    assert reported["cached_tokens"] == 4
    assert reported["hit_ratio"] == pytest.approx(4 / 16)
    cache = merged.manifest["cache"]
    assert cache["flushed"] is True
    assert cache["hit_ratio"] is None  # shard 0's 0.9 covered only its own window
    assert cache["reported"] == reported
