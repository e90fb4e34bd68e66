"""Live metrics: names/labels per DESIGN.md and bucket resolution against exact percentiles."""

from __future__ import annotations

import random

from loadgen.records import RequestRecord
from loadgen.run.live_metrics import ITL_BUCKETS, LATENCY_BUCKETS, LiveMetrics, RunLabels
from loadgen.stats import percentile

MS = 1_000_000
LABELS = {"run_id": "r1", "target": "sim", "model": "m", "scenario": "s"}


def _metrics() -> LiveMetrics:
    return LiveMetrics(RunLabels(**LABELS), {"engine": "vllm", "engine_version": "0.26.0", "seed": "42"})


def test_observe_ok_and_failed_requests() -> None:
    m = _metrics()
    r = RequestRecord(0, "x", False, 0, 10, 3)
    r.sent_ns, r.token_ns, r.first_ns, r.last_ns = 2 * MS, [22 * MS, 27 * MS, 33 * MS], 22 * MS, 33 * MS
    r.outcome, r.output_tokens, r.prompt_tokens = "ok", 3, 10
    bad = RequestRecord(1, "y", False, 0, 10, 3)
    bad.outcome = "timeout"
    m.observe_sent(r, 2 * MS)
    m.observe_sent(bad, 0)
    m.observe(r, slo_met=True)
    m.observe(bad, slo_met=False)
    get = m.registry.get_sample_value
    assert get("loadgen_requests_total", {**LABELS, "outcome": "ok"}) == 1
    assert get("loadgen_requests_total", {**LABELS, "outcome": "timeout"}) == 1
    assert get("loadgen_time_to_first_token_seconds_sum", LABELS) == 0.020
    assert get("loadgen_inter_token_latency_seconds_count", LABELS) == 2
    assert get("loadgen_output_tokens_total", LABELS) == 3
    assert get("loadgen_prompt_tokens_total", LABELS) == 10
    assert get("loadgen_slo_met_requests_total", LABELS) == 1
    assert get("loadgen_schedule_lag_seconds_count", LABELS) == 2
    assert get("loadgen_schedule_lag_seconds_sum", LABELS) == 0.002  # observed at send, not at the end
    assert (
        get("loadgen_run_info", {**LABELS, "engine": "vllm", "engine_version": "0.26.0", "seed": "42"}) == 1
    )


def _ok(index: int, prompt: int, cached: int | None, warmup: bool = False) -> RequestRecord:
    r = RequestRecord(index, f"r{index}", warmup, 0, prompt, 2, prompt_tokens=prompt, cached_tokens=cached)
    r.sent_ns, r.token_ns, r.first_ns, r.last_ns = MS, [2 * MS, 3 * MS], 2 * MS, 3 * MS
    r.outcome, r.output_tokens = "ok", 2
    return r


def test_cached_prompt_tokens_counter_appears_with_the_first_reported_value() -> None:
    m = _metrics()
    get = m.registry.get_sample_value
    m.observe(_ok(0, 100, None), slo_met=False)  # the engine sent no prompt_tokens_details
    assert get("loadgen_cached_prompt_tokens_total", LABELS) is None  # "no data", not a 0% hit ratio
    m.observe(_ok(1, 100, 0), slo_met=False)
    assert get("loadgen_cached_prompt_tokens_total", LABELS) == 0
    m.observe(_ok(2, 200, 160), slo_met=False)
    m.observe(_ok(3, 200, 160, warmup=True), slo_met=False)  # warm-up: not measured
    assert get("loadgen_cached_prompt_tokens_total", LABELS) == 160
    assert get("loadgen_prompt_tokens_total", LABELS) == 400


def test_item6_lag_histogram_is_lateness_and_slot_wait_its_own() -> None:
    """Issue 11 item 6: a request that waited 2 s for a slot and went out 1 ms after it came free."""
    m = _metrics()
    r = RequestRecord(0, "x", False, 0, 10, 3)
    r.slot_free_ns, r.sent_ns, r.outcome = 2_000 * MS, 2_001 * MS, "connect_error"
    m.observe_sent(r, r.sent_ns - r.due_ns)  # as the dispatcher does at the hand-over
    m.observe(r, slo_met=False)
    get = m.registry.get_sample_value
    assert get("loadgen_schedule_lag_seconds_sum", LABELS) == 0.001  # sent - due, not sent - scheduled
    assert get("loadgen_slot_wait_seconds_sum", LABELS) == 2.0
    assert get("loadgen_requests_total", {**LABELS, "outcome": "connect_error"}) == 1  # item 4


def test_bucket_ranges_follow_the_contract() -> None:
    assert LATENCY_BUCKETS[0] == 0.0001  # sub-millisecond TTFTs (local engine, cache hit) stay inside
    assert LATENCY_BUCKETS[-1] >= 300
    assert ITL_BUCKETS[0] == 0.0005
    assert ITL_BUCKETS[-1] >= 5


def _histogram_quantile(q: float, bounds: list[float], values: list[float]) -> float:
    """Prometheus' histogram_quantile: linear interpolation inside the bucket holding rank q*n."""
    counts = [sum(1 for v in values if v <= b) for b in bounds]
    rank = q * len(values)
    for i, c in enumerate(counts):
        if c >= rank:
            lo, prev = (bounds[i - 1], counts[i - 1]) if i else (0.0, 0)
            return lo + (bounds[i] - lo) * (rank - prev) / (c - prev)
    return bounds[-1]


def test_histogram_quantile_within_5_percent_of_exact() -> None:
    rng = random.Random(1)
    for median, sigma in ((0.05, 0.5), (0.8, 1.0), (0.006, 0.3), (0.0009, 0.3)):
        values = sorted(rng.lognormvariate(0, sigma) * median for _ in range(3000))
        bounds = ITL_BUCKETS if 0.001 < median < 0.01 else LATENCY_BUCKETS
        for q in (0.5, 0.9, 0.99):
            exact = percentile(values, q * 100)
            assert abs(_histogram_quantile(q, bounds, values) / exact - 1) < 0.05


def test_every_emitted_metric_is_documented_and_exposition_is_cumulative() -> None:
    from pathlib import Path

    m = _metrics()
    m.ttft.observe(LATENCY_BUCKETS[3])  # exactly on a bound: counted in that bucket (le is inclusive)
    m.ttft.observe(1000.0)  # beyond the last bound: only in +Inf
    m.counters.cached_tokens = 4  # as after a reported value: the cached-tokens counter is exposed too
    names = {metric.name for metric in m.registry.collect()}
    assert "loadgen_cached_prompt_tokens" in names
    doc = (Path(__file__).resolve().parents[2] / "docs" / "METRICS.md").read_text()
    for name in names:
        shown = (
            name + "_total"
            if name
            in {
                "loadgen_requests",
                "loadgen_prompt_tokens",
                "loadgen_output_tokens",
                "loadgen_slo_met_requests",
                "loadgen_cached_prompt_tokens",
            }
            else name
        )
        assert f"| `{shown}` |" in doc, shown
    get = m.registry.get_sample_value
    bucket = "loadgen_time_to_first_token_seconds_bucket"
    assert get(bucket, {**LABELS, "le": str(LATENCY_BUCKETS[2])}) == 0
    assert get(bucket, {**LABELS, "le": str(LATENCY_BUCKETS[3])}) == 1
    assert get(bucket, {**LABELS, "le": "+Inf"}) == 2
    assert get("loadgen_time_to_first_token_seconds_count", LABELS) == 2


def test_batched_observe_exposes_the_same_series_as_one_observe_per_value() -> None:
    from prometheus_client import generate_latest

    rng = random.Random(7)
    gaps = [rng.lognormvariate(-5, 1) for _ in range(500)] + [ITL_BUCKETS[3], 99.0]
    one, batched = _metrics(), _metrics()
    for gap in gaps:
        one.itl.observe(gap)
    gaps += [ITL_BUCKETS[i] for i in range(0, len(ITL_BUCKETS), 7)] + [0.0, ITL_BUCKETS[-1]]
    for gap in gaps[502:]:
        one.itl.observe(gap)
    batched.itl.observe_many([])
    batched.itl.observe_many(gaps[:200])
    for start in range(200, len(gaps), 31):  # request-sized batches, values on bucket bounds included
        batched.itl.observe_many(gaps[start : start + 31])

    def itl_lines(m: LiveMetrics) -> list[bytes]:
        return [x for x in generate_latest(m.registry).splitlines() if b"inter_token" in x]

    assert len(itl_lines(one)) > 100
    assert itl_lines(batched) == itl_lines(one)
