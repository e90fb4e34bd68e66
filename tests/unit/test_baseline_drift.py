"""Drift: a steady slope is reported as its own kind and raises no step alarm; a step on top of a
drift is still a step."""

from __future__ import annotations

import random

import pytest

from loadgen.analysis.changepoint import DetectorSettings
from loadgen.analysis.drift import drift_at, trend_explains
from loadgen.baseline.check import check_series, gating
from loadgen.baseline.history import StoredRun


def _series(
    n: int, slope: float, step_at: int | None = None, step: float = 0.0, seed: int = 4
) -> list[float]:
    """TPOT around 10 ms, 1% noise, growing by `slope` a run (and by `step` from run `step_at` on)."""
    rng = random.Random(seed)
    return [
        0.010
        * (1 + slope) ** i
        * (1 + (step if step_at is not None and i >= step_at else 0.0))
        * (1 + rng.gauss(0, 0.01))
        for i in range(n)
    ]


def test_a_steady_slope_is_a_drift_with_its_slope() -> None:
    values = _series(30, 0.008)
    drift = drift_at(values, 29, higher_is_better=False, alpha=0.001, min_relative=0.01)
    assert drift is not None
    assert drift.worse
    assert drift.slope == pytest.approx(0.008, abs=0.002)
    assert (drift.start, drift.end) == (10, 29)
    assert drift_at(_series(30, 0.0), 29, higher_is_better=False, alpha=0.001, min_relative=0.01) is None


def test_the_trend_explains_a_drift_but_not_a_step_on_top_of_it() -> None:
    drifting = _series(30, 0.008)
    assert trend_explains(drifting, 26, 29, worse_up=True, alpha=0.001)
    stepped = _series(30, 0.008, step_at=26, step=0.15)
    assert not trend_explains(stepped, 26, 29, worse_up=True, alpha=0.001)
    assert not trend_explains(_series(30, 0.0, step_at=26, step=0.15), 26, 29, worse_up=True, alpha=0.001)


def _runs(values: list[float]) -> list[StoredRun]:
    return [
        StoredRun(f"run{i:02d}", f"2026-12-{i + 1:02d}T02:00:00Z", "ok", {"tpot_p99": v}, {}, {})
        for i, v in enumerate(values)
    ]


def test_the_check_reports_a_drift_as_its_own_kind_and_never_gates_on_it() -> None:
    findings = check_series("s", "s/a@x", _runs(_series(30, 0.008)), ["tpot_p99"], DetectorSettings())
    assert [f.kind for f in findings] == ["drift"]
    assert findings[0].slope == pytest.approx(0.008, abs=0.002)
    assert gating(findings) == []
    stepped = check_series("s", "s/a@x", _runs(_series(30, 0.0, 22, 0.2)), ["tpot_p99"], DetectorSettings())
    assert [f.kind for f in stepped if f.open] == ["regression"]
