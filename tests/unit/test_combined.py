"""Combined series of correlated metrics (loadgen.analysis.combined) and the combined tests of a check
(loadgen.baseline.joint, through loadgen.baseline.decide)."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from loadgen.analysis.changepoint import Change, DetectorSettings
from loadgen.analysis.combined import REFIT, combined_series, covariance, fit_runs, gls_weights, oriented_logs
from loadgen.baseline.decide import decide, shares
from loadgen.baseline.joint import groups, merged

METRICS = ("ttft_p50", "ttft_p99", "tpot_p50", "tpot_p99", "e2e_p50", "e2e_p99", "output_throughput")
DECODE = ("tpot_p50", "tpot_p99", "e2e_p50", "e2e_p99", "output_throughput")


def history(
    seed: int, n: int, cv: float, step_at: int | None = None, step: float = 0.0
) -> dict[str, list[float]]:
    """Runs of the 7 metrics: a run-wide factor (weight 0.6) plus each metric's own noise; from
    `step_at` on the decode metrics `step` worse (throughput lower)."""
    rng = random.Random(seed)
    out: dict[str, list[float]] = {m: [] for m in METRICS}
    for i in range(n):
        shared = rng.gauss(0, 1)
        for m in METRICS:
            log = cv * (0.6 * shared + 0.8 * rng.gauss(0, 1))
            if step_at is not None and i >= step_at and m in DECODE:
                log += math.log1p(step)
            out[m].append(
                math.exp(-log if m == "output_throughput" else log) * (2000 if m[0] == "o" else 0.05)
            )
    return out


def test_gls_weights_move_by_the_common_step_and_take_out_the_shared_noise() -> None:
    # 3 metrics of unit noise, correlation 0.5 between each pair (S = 0.5 I + 0.5 11'), the group =
    # the first two (d = (1, 1, 0)): S^-1 = 2 (I - 0.25 11'), S^-1 d = 2 ((1, 1, 0) - 0.5 (1, 1, 1))
    # = (1, 1, -1), d'S^-1 d = 2, so w = (0.5, 0.5, -0.5)
    cov = 0.5 * np.eye(3) + 0.5 * np.ones((3, 3))
    w = gls_weights(cov, np.array([True, True, False]))
    assert w == pytest.approx([0.5, 0.5, -0.5])
    # its variance w'Sw = 1 / d'S^-1 d = 0.5, against 1.0 for one metric and (1 + 1 + 2 * 0.5) / 4
    # = 0.75 for the plain mean of the two
    assert float(w @ cov @ w) == pytest.approx(0.5)


def test_the_covariance_is_one_factor_and_robust_to_a_step() -> None:
    figures = history(3, 60, 0.03)
    logs = oriented_logs(figures, {m: m == "output_throughput" for m in METRICS})
    cov = covariance(logs)
    assert cov is not None
    sd = np.sqrt(np.diag(cov))
    assert sd == pytest.approx(0.03, rel=0.3)  # each metric's run noise
    rho = cov[0, 1] / (sd[0] * sd[1])
    assert rho == pytest.approx(0.36, abs=0.15)  # 0.6^2: the run-wide factor
    stepped = history(3, 60, 0.03, step_at=30, step=0.2)  # a 20% step touches one difference only
    cov_step = covariance(oriented_logs(stepped, {m: m == "output_throughput" for m in METRICS}))
    assert cov_step is not None
    assert np.sqrt(np.diag(cov_step)) == pytest.approx(sd, rel=0.2)
    assert covariance(logs[:5]) is None  # too few runs


def test_the_combined_series_moves_by_the_step_and_is_quieter_than_one_metric() -> None:
    figures = history(4, 80, 0.03, step_at=40, step=0.05)
    logs = oriented_logs(figures, {m: m == "output_throughput" for m in METRICS})
    mask = np.array([m in DECODE for m in METRICS])
    c = np.log(combined_series(logs, mask, fitted=40))  # weights fitted before the step
    assert np.median(c[40:]) - np.median(c[:40]) == pytest.approx(math.log1p(0.05), abs=0.015)
    assert np.std(c[:40]) < 0.8 * np.std(logs[:40, METRICS.index("tpot_p50")])
    # a missing figure leaves its run without a combined value
    logs[7, 2] = math.nan
    assert math.isnan(combined_series(logs, mask)[7])
    assert fit_runs(REFIT * 2 + 3) == REFIT * 2


def test_groups_need_two_watched_metrics_of_a_phase() -> None:
    assert groups(["ttft_p50", "ttft_p99", "tpot_p99", "error_rate"]) == {"prefill": ("ttft_p50", "ttft_p99")}
    assert groups(["ttft_p99", "tpot_p99", "e2e_p99"]) == {"decode": ("tpot_p99", "e2e_p99")}


def test_the_budget_splits_over_metrics_and_combined_tests_and_sums_to_alpha() -> None:
    s = DetectorSettings()
    each, joint = shares(s, 8, 2)
    assert 8 * each.alpha + 2 * joint.alpha == pytest.approx(s.alpha)
    assert 8 * each.loo_alpha + 2 * joint.loo_alpha == pytest.approx(s.loo_alpha)
    assert shares(s, 8, 0)[0].alpha == pytest.approx(s.alpha / 8)  # no combined test: Bonferroni


def test_a_5_percent_decode_step_is_found_more_often_with_the_combined_test() -> None:
    combined = DetectorSettings()
    single = DetectorSettings(combined_share=0.0)
    found = {"combined": 0, "single": 0}
    for seed in range(20):
        figures = history(100 + seed, 20, 0.03, step_at=14, step=0.05)
        for name, s in (("combined", combined), ("single", single)):
            out = decide(figures, None, s, as_raised=True)
            found[name] += any(
                c.worse and abs(c.index - 14) <= 2 and c.detected_at <= 16 for m in DECODE for c in out[m]
            )
    # by the 3rd run at the new level, CV 3%: 13 of 20 with the combined tests, 6 of 20 with
    # the same budget over single metrics only
    assert found["combined"] >= found["single"] + 3
    assert found["combined"] >= 9


def test_step_free_checks_raise_almost_no_alarm_with_the_combined_tests() -> None:
    checks = alarmed = 0
    for seed in range(15):
        figures = history(500 + seed, 40, 0.03)
        out = decide(figures, None, DetectorSettings(), as_raised=True)
        alarmed += len({c.detected_at for changes in out.values() for c in changes if c.worse})
        checks += 40
    assert alarmed / checks < 0.02


def test_a_combined_change_is_reported_once_per_metric_the_earliest_raising_kept() -> None:
    own = [Change(10, 14, 1.0, 1.1, 0.001, True, "confirmed")]
    joint = [
        Change(11, 13, 1.0, 1.1, 0.0001, True, "confirmed"),  # the same change, raised a check earlier
        Change(10, 15, 1.0, 1.1, 0.0001, True, "confirmed"),  # the same change, raised later: dropped
        Change(30, 33, 1.0, 1.1, 0.0001, True, "confirmed"),  # another change
    ]
    assert [(c.index, c.detected_at) for c in merged(own, joint, as_raised=True)] == [
        (11, 13),
        (10, 14),
        (30, 33),
    ]
    assert [(c.index, c.detected_at) for c in merged(own, joint, as_raised=False)] == [(10, 14), (30, 33)]


def test_a_suspicion_after_a_combined_confirmed_change_is_dropped_as_stale() -> None:
    # the combined test confirmed a change at 7 (by the check after run 10); the metric's own test,
    # still at the level before 7, suspects run 11: within max_after (6) runs of 7, so it is dropped
    own = [Change(11, 11, 1.0, 1.15, 1e-6, True, "suspected")]
    joint = [Change(7, 10, 1.0, 1.15, 1e-4, True, "confirmed")]
    assert [(c.index, c.status) for c in merged(own, joint, as_raised=False)] == [(7, "confirmed")]
    late = [Change(20, 20, 1.0, 1.15, 1e-6, True, "suspected")]  # 13 runs later: a new suspicion
    assert [c.index for c in merged(late, joint, as_raised=False)] == [7, 20]
