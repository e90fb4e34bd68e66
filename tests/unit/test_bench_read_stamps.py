"""`python -m bench kstamp`'s pure part: the result lines from per-block CPU per read."""

from __future__ import annotations

from bench.read_stamps import summary


def test_summary_gives_medians_and_the_median_per_block_difference() -> None:
    lines = summary({"kernel": [10.0, 12.0, 11.5], "read": [9.0, 11.0, 12.0]})
    assert lines[0] == "CPU per read, kernel stamps: 11.50 us; read stamps: 11.00 us"
    # per-block differences +1.0, +1.0, -0.5: median +1.00, against the read median 11.00
    assert lines[1].startswith("kernel - read: +1.00 us a read")
    assert lines[1].endswith("+9.1%)")
