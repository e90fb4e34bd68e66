"""`python -m bench kstamp`'s pure part: the result lines from per-block CPU per read."""

from __future__ import annotations

from bench.read_stamps import summary


def test_summary_gives_medians_and_the_median_per_block_difference() -> None:
    lines = summary({"kernel": [10.0, 12.0, 11.5], "read": [9.0, 11.0, 12.0]})
    assert lines[0] == "CPU per read, kernel stamps, C reader: 11.50 us; read stamps: 11.00 us"
    # per-block differences +1.0, +1.0, -0.5: median +1.00, against the read median 11.00
    assert lines[1].startswith("kernel - read: +1.00 us a read")
    assert lines[1].endswith("+9.1%)")


def test_summary_gives_each_reader_against_read_stamps() -> None:
    lines = summary({"kernel": [8.0, 9.0], "python": [12.0, 13.0], "read": [11.0, 11.0]})
    assert lines[0] == (
        "CPU per read, kernel stamps, C reader: 8.50 us; kernel stamps, Python reader: 12.50 us; "
        "read stamps: 11.00 us"
    )
    assert lines[1].startswith("kernel - read: -2.50 us a read")
    assert lines[2].startswith("python - read: +1.50 us a read")
    assert len(lines) == 3
