"""Arrival processes: statistical checks on the precomputed schedule."""

from __future__ import annotations

import math
import statistics

import pytest

from loadgen.config import RunConfig
from loadgen.workload.schedule import NS, build_schedule


def _gaps(config: RunConfig) -> list[float]:
    offsets = build_schedule(config)
    return [(b - a) / NS for a, b in zip(offsets, offsets[1:], strict=False)]


def test_constant_gaps_are_exact() -> None:
    gaps = _gaps(RunConfig(rate=20.0, arrival="constant", num_prompts=50))
    assert all(g == pytest.approx(0.05, abs=1e-9) for g in gaps)


def test_first_send_at_zero_and_inf_sends_all_at_once() -> None:
    assert build_schedule(RunConfig(rate=4.0, num_prompts=5))[0] == 0
    assert build_schedule(RunConfig(num_prompts=30, warmup=2)) == [0] * 32


def test_poisson_mean_and_coefficient_of_variation() -> None:
    gaps = _gaps(RunConfig(rate=10.0, num_prompts=5000))
    assert statistics.mean(gaps) == pytest.approx(0.1, rel=0.05)
    assert statistics.stdev(gaps) / statistics.mean(gaps) == pytest.approx(1.0, rel=0.06)


@pytest.mark.parametrize("burstiness", [0.25, 4.0])
def test_gamma_burstiness_sets_cv(burstiness: float) -> None:
    gaps = _gaps(RunConfig(rate=10.0, arrival="gamma", burstiness=burstiness, num_prompts=5000))
    assert statistics.mean(gaps) == pytest.approx(0.1, rel=0.06)
    cv = statistics.stdev(gaps) / statistics.mean(gaps)
    assert cv == pytest.approx(1 / math.sqrt(burstiness), rel=0.08)


def test_duration_cuts_the_schedule() -> None:
    offsets = build_schedule(RunConfig(rate=50.0, arrival="constant", duration_s=2.0))
    assert len(offsets) == 100
    assert offsets[-1] < 2 * NS


def test_same_seed_same_schedule() -> None:
    a = build_schedule(RunConfig(rate=7.0, num_prompts=100, seed=1))
    assert a == build_schedule(RunConfig(rate=7.0, num_prompts=100, seed=1, input_len="fixed:3"))
    assert a != build_schedule(RunConfig(rate=7.0, num_prompts=100, seed=2))
