"""bench.late_sends: late sends counted per 100 ms window and in the run's first half second."""

from __future__ import annotations

from bench.late_sends import LateSpread, late_spread


def _line(sent_s: float, lag_ms: float) -> dict[str, float]:
    return {"sent_s": sent_s, "schedule_lag_s": lag_ms / 1e3}


def test_bunched_late_sends_fall_in_one_window() -> None:
    lines = [_line(i / 100, 0.1) for i in range(300)]  # 3 s at 100 req/s, on time
    lines += [_line(1.20 + i / 1000, 5.0) for i in range(30)]  # a 30 ms stall at 1.2 s
    got = late_spread(lines)
    assert got == LateSpread(sends=330, late=30, windows=1, worst=30, at_start=0)
    assert got.line() == "late 30/330 in 1 windows of 100 ms (worst 30), 0 in the first 0.5 s"


def test_spread_late_sends_and_the_start_are_counted_apart() -> None:
    # every 10th send late by 3 ms over 2 s: one in each 100 ms window; the first 0.5 s holds 5 of them
    lines = [_line(i / 100, 3.0 if i % 10 == 0 else 0.5) for i in range(200)]
    lines.append({"sent_s": None, "schedule_lag_s": None})  # never sent: skipped
    got = late_spread(lines)
    assert (got.sends, got.late, got.windows, got.worst, got.at_start) == (200, 20, 20, 1, 5)
    assert late_spread([_line(0.0, 1.9)]).line() == "late 0/1"  # 1.9 ms is within the 2 ms budget
