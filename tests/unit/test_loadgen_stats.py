"""Metric definitions on hand-computed cases, exact percentiles, goodput and the summary."""

from __future__ import annotations

import random

import numpy as np
import pytest

from loadgen.records import RequestRecord
from loadgen.stats import describe, e2e_s, itls_s, meets_slo, percentile, summarize, tpot_s, ttft_s

MS = 1_000_000


def _rec(
    index: int = 0,
    sent: int = 0,
    tokens: tuple[int, ...] = (),
    out: int | None = None,
    outcome: str = "ok",
    warmup: bool = False,
    scheduled: int = 0,
) -> RequestRecord:
    r = RequestRecord(index, f"r{index}", warmup, scheduled, 10, 5)
    r.sent_ns, r.token_ns, r.outcome = sent, list(tokens), outcome
    if tokens:
        r.first_ns, r.last_ns, r.done_ns = tokens[0], tokens[-1], tokens[-1] + MS
    r.output_tokens = len(tokens) if out is None else out
    r.prompt_tokens = 10
    return r


def test_definitions_hand_computed() -> None:
    # sent at 0; tokens at 20, 25, 31, 40 ms
    r = _rec(sent=0, tokens=(20 * MS, 25 * MS, 31 * MS, 40 * MS))
    assert ttft_s(r) == pytest.approx(0.020)  # first token - send
    assert e2e_s(r) == pytest.approx(0.040)  # last token - send
    assert tpot_s(r) == pytest.approx((0.040 - 0.020) / (4 - 1))  # 6.67 ms
    assert itls_s(r) == pytest.approx([0.005, 0.006, 0.009])


def test_tpot_uses_usage_count_and_needs_two_tokens() -> None:
    # one chunk carried 9 tokens per usage: TPOT = (100 - 20) / (9 - 1) = 10 ms
    r = _rec(tokens=(20 * MS, 100 * MS), out=9)
    assert tpot_s(r) == pytest.approx(0.010)
    assert tpot_s(_rec(tokens=(20 * MS,))) is None


def test_percentile_matches_numpy_linear() -> None:
    rng = random.Random(0)
    values = sorted(rng.expovariate(1.0) for _ in range(1001))
    for q in (0, 50, 90, 95, 99, 100):
        assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)))
    d = describe([3.0, 1.0, 2.0, 4.0])
    assert (d["count"], d["mean"], d["min"], d["max"], d["p50"]) == (4, 2.5, 1.0, 4.0, 2.5)
    assert d["std"] == pytest.approx(float(np.std([1, 2, 3, 4])))
    assert describe([])["p99"] is None


def test_slo_checks_every_given_limit() -> None:
    r = _rec(tokens=(20 * MS, 30 * MS, 40 * MS))  # ttft 20 ms, tpot 10 ms, e2e 40 ms
    assert meets_slo(r, {"ttft_s": 0.025, "tpot_s": 0.010, "e2e_s": 0.050})
    assert not meets_slo(r, {"ttft_s": 0.015})
    assert not meets_slo(_rec(tokens=(1,), outcome="timeout"), {})


def test_summary_counts_goodput_and_excludes_warmup() -> None:
    records = [
        _rec(0, sent=0, tokens=(10 * MS, 20 * MS), warmup=True),
        _rec(1, sent=0, tokens=(10 * MS, 20 * MS)),  # ttft 10 ms
        _rec(2, sent=100 * MS, tokens=(150 * MS, 160 * MS), scheduled=99 * MS),  # ttft 50 ms, lag 1 ms
        _rec(3, sent=200 * MS, outcome="http_error", scheduled=200 * MS),
    ]
    records[3].done_ns = 399 * MS  # window: first measured send (0) to last completion (399 ms)
    s = summarize(records, {"ttft_s": 0.030})
    assert s["requests"] == {
        "total": 4,
        "measured": 3,
        "warmup": 1,
        "ok": 2,
        "failed": 1,
        "cancelled": 0,
        "by_outcome": {
            "ok": 2,
            "http_error": 1,
            "timeout": 0,
            "connect_error": 0,
            "disconnect": 0,
            "protocol_error": 0,
            "cancelled": 0,
        },
    }
    assert s["duration_s"] == pytest.approx(0.399)
    assert s["request_throughput"] == pytest.approx(2 / 0.399)
    assert s["goodput"] == pytest.approx(1 / 0.399)  # only request 1 meets ttft <= 30 ms
    assert s["slo_met_requests"] == 1
    assert s["output_token_throughput"] == pytest.approx(4 / 0.399)
    assert s["ttft_s"]["count"] == 2
    assert s["ttft_s"]["mean"] == pytest.approx(0.030)
    assert s["schedule_lag_s"]["max"] == pytest.approx(0.001)
    assert s["error_rate"] == pytest.approx(1 / 3)
    assert s["token_count"] == "usage"


def test_item4_cancelled_requests_are_not_failures() -> None:
    """Issue 11 item 4: loadgen's own cancellations are out of the error rate."""
    records = [_rec(i, tokens=(MS,)) for i in range(6)]
    records += [_rec(6, outcome="http_error"), _rec(7, outcome="connect_error")]
    records += [_rec(8 + i, outcome="cancelled") for i in range(12)]
    s = summarize(records, {})
    # error rate = failed / (ok + failed) = 2 / (6 + 2) = 0.25 (was 14 / 20 = 0.7 counting cancelled)
    assert s["error_rate"] == pytest.approx(0.25)
    assert (s["requests"]["failed"], s["requests"]["cancelled"]) == (2, 12)
    assert s["requests"]["by_outcome"]["connect_error"] == 1
    assert summarize([_rec(0, outcome="cancelled")], {})["error_rate"] == 0.0


def test_item6_lateness_and_slot_wait_are_separate() -> None:
    """Issue 11 item 6: a request that waited for a concurrency slot is late only after the slot."""
    r = _rec(sent=1_003 * MS, scheduled=0)
    r.slot_free_ns = 1_000 * MS  # waited 1 s for a slot, then sent 3 ms after it came free
    assert r.due_ns == 1_000 * MS
    on_time = _rec(1, sent=2 * MS, scheduled=1 * MS)  # no cap: due = scheduled, late 1 ms
    s = summarize([r, on_time], {})
    assert s["slot_wait_s"]["max"] == pytest.approx(1.0)
    assert s["slot_wait_s"]["min"] == 0.0
    assert s["schedule_lag_s"]["max"] == pytest.approx(0.003)  # lateness = sent - due
    assert s["schedule_lag_s"]["min"] == pytest.approx(0.001)


def test_item7_mean_measured_tokens_per_request() -> None:
    """Issue 11 item 7: measured prompt/output tokens per request, from usage, ok requests only."""
    a, b = _rec(0, tokens=(MS, 2 * MS), out=7), _rec(1, tokens=(MS,), out=3)
    a.prompt_tokens, b.prompt_tokens = 93, 145  # configured input_len is 10
    s = summarize([a, b, _rec(2, outcome="timeout")], {})
    assert s["mean_prompt_tokens"] == pytest.approx((93 + 145) / 2)  # 119
    assert s["mean_output_tokens"] == pytest.approx((7 + 3) / 2)  # 5
    assert summarize([], {})["mean_prompt_tokens"] is None


def test_token_count_marks_estimates() -> None:
    a, b = _rec(0, tokens=(MS,)), _rec(1, tokens=(MS,))
    b.token_count = "estimated"
    assert summarize([a, b], {})["token_count"] == "mixed"
    assert summarize([b], {})["token_count"] == "estimated"
    assert summarize([a], {})["goodput"] is None
