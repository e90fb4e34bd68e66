"""The check's scan window: a long series is scanned from its last SCAN_WINDOW runs, indexes kept."""

from __future__ import annotations

import random

from loadgen.analysis.changepoint import DetectorSettings
from loadgen.baseline.decide import SCAN_WINDOW, decide


def test_a_long_series_is_scanned_from_its_window_with_whole_series_indexes() -> None:
    rng = random.Random(5)
    n, step_at = SCAN_WINDOW + 400, SCAN_WINDOW + 370
    tpot = [0.01 * (1.2 if i >= step_at else 1.0) * (1 + rng.gauss(0, 0.01)) for i in range(n)]
    (change,) = decide({"tpot_p99": tpot}, None, DetectorSettings())["tpot_p99"]
    assert change.index == step_at  # the index in the whole series, not in the window
    assert change.worse
