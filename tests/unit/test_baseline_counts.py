"""The count test of the error rate (errors out of requests) and the check's one budget over metrics."""

from __future__ import annotations

import random

import pytest

from loadgen.analysis.changepoint import DetectorSettings
from loadgen.analysis.counts import Counts, count_raised, dispersion
from loadgen.baseline.decide import decide, per_metric

SETTINGS = per_metric(DetectorSettings(), 8)  # one metric's share of a check watching 8


def _counts(n: int, share: float, step_at: int | None = None, after: float = 0.0, seed: int = 3) -> Counts:
    """500 requests a run, errors binomial at `share` (`after` from run `step_at` on)."""
    rng = random.Random(seed)
    errors = []
    for i in range(n):
        p = after if step_at is not None and i >= step_at else share
        errors.append(sum(rng.random() < p for _ in range(500)))
    return Counts(errors, [500] * n)


def test_a_rise_from_zero_errors_is_found() -> None:
    # 12 runs of 0/500, then 10/500 (2%) a run: a t-test on rates drops the zeros and sees nothing
    counts = Counts([0] * 12 + [10, 11, 9], [500] * 15)
    (change,) = count_raised(counts, SETTINGS)
    assert (change.index, change.detected_at, change.worse) == (12, 14, True)  # at the 3rd run (min_after)
    assert change.before_median == 0.0
    assert change.after_median == pytest.approx(30 / 1500)  # the pooled share of the 3 runs after


def test_steady_errors_raise_almost_nothing() -> None:
    # 20 steady series of 40 runs at 1% errors: a check after each run, about 600 checks of 5 splits
    raised = [count_raised(_counts(40, 0.01, seed=seed), SETTINGS) for seed in range(20)]
    assert sum(bool(r) for r in raised) <= 1


def test_one_burst_of_errors_is_not_a_change() -> None:
    # one run with 40 timeouts, the next back at 0: without the burst the rest is not higher
    counts = Counts([0] * 12 + [40, 0, 0], [500] * 15)
    assert count_raised(counts, SETTINGS) == []


def test_runs_without_requests_are_left_out() -> None:
    counts = Counts([0] * 12 + [0, 10, 11, 9], [500] * 12 + [0, 500, 500, 500])
    (change,) = count_raised(counts, SETTINGS)
    assert change.index == 13  # the run of 0 requests is not the first at the new level


def test_dispersion_is_one_for_binomial_counts_and_more_for_spread_ones() -> None:
    assert dispersion([5, 5, 5, 5], [500] * 4) == 1.0  # chi2 = 0 -> at least 1
    # shares 0% and 2% alternate: chi2 = 4 runs * 5^2 / (500 * 0.01 * 0.99) = 20.2; / 3 df = 6.7
    assert dispersion([0, 10, 0, 10], [500] * 4) == pytest.approx(20.202 / 3, rel=1e-3)


def test_the_budget_is_split_over_the_watched_metrics() -> None:
    each = per_metric(DetectorSettings(alpha=0.008, suspect_alpha=0.004, loo_alpha=0.04), 4)
    assert (each.alpha, each.suspect_alpha, each.loo_alpha) == (0.002, 0.001, 0.01)
    assert per_metric(DetectorSettings(), 1) == DetectorSettings()


def test_decide_uses_the_count_test_for_the_error_rate() -> None:
    counts = Counts([0] * 12 + [10, 11, 9], [500] * 15)
    rates = [e / n for e, n in zip(counts.events, counts.trials, strict=True)]
    tpot = [0.01 * (1 + 0.01 * ((i * 7) % 5 - 2)) for i in range(15)]
    found = decide({"error_rate": rates, "tpot_p99": tpot}, counts, DetectorSettings())
    assert [c.index for c in found["error_rate"]] == [12]
    assert found["tpot_p99"] == []
    # without counts the rates go to the t-test, which leaves the zero runs out and finds nothing
    assert decide({"error_rate": rates}, None, DetectorSettings())["error_rate"] == []
