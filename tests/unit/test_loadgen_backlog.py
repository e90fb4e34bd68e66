"""The backlog's bookkeeping: bound, low-water mark, peaks and time saturated (no clock: times given)."""

from __future__ import annotations

import pytest

from loadgen.run.backlog import PIECE_OVERHEAD, Backlog, Bound, held_bytes


def test_held_bytes_counts_payload_and_per_read_overhead():
    reads = [(1, b"abc"), (2, b"defgh")]
    # 3 + 5 payload bytes + 2 reads x PIECE_OVERHEAD
    assert held_bytes(reads) == 8 + 2 * PIECE_OVERHEAD
    assert held_bytes(None) == held_bytes([]) == 0


def test_over_the_bound_until_drained_to_half():
    backlog = Backlog(Bound(requests=4, bytes=10**9))
    for _ in range(5):
        backlog.add(10)
    assert backlog.over()  # 5 > 4
    backlog.remove(10)
    backlog.remove(10)
    assert not backlog.over()
    assert not backlog.drained()  # 3 > 4 // 2: still above the low-water mark
    backlog.remove(10)
    assert backlog.drained()  # 2 <= 2


def test_bytes_alone_put_the_backlog_over():
    backlog = Backlog(Bound(requests=100, bytes=1000))
    backlog.add(1001)
    assert backlog.over()
    assert not backlog.drained()


def test_report_sums_the_saturated_episodes():
    backlog = Backlog(Bound(requests=1, bytes=2_000_000))
    backlog.add(1_500_000)
    backlog.add(1_500_000)
    assert backlog.enter(1_000_000_000) is True  # the first episode: warn
    backlog.leave(1_250_000_000)
    assert backlog.enter(2_000_000_000) is False  # a later one: no second warning
    assert backlog.saturated
    backlog.leave(2_500_000_000)
    backlog.leave(9_000_000_000)  # outside an episode: no time added
    report = backlog.report()
    # 0.25 s + 0.5 s over the bound, in two episodes
    assert report["saturated_s"] == pytest.approx(0.75)
    assert report["episodes"] == 2
    assert report["saturated"] is True
    assert report["peak_backlog_requests"] == 2
    assert report["peak_backlog_mb"] == pytest.approx(3.0)
    assert (report["bound_requests"], report["bound_mb"]) == (1, 2.0)


def test_an_unsaturated_backlog_reports_no_saturation():
    report = Backlog(Bound()).report()
    assert report["saturated"] is False
    assert report["saturated_s"] == 0


@pytest.mark.parametrize(("requests", "size"), [(0, 1), (1, 0), (-5, 10)])
def test_a_bound_below_one_is_refused_naming_the_value(requests, size):
    with pytest.raises(ValueError, match=f"requests={requests}, bytes={size}"):
        Bound(requests=requests, bytes=size)
