"""loadgen._sortq.sort: an int64 buffer sorted in place, as sorted() orders it; describe_ns gives
the same figures through it as through sorted() and numpy."""

from __future__ import annotations

import random
from array import array

import pytest

from loadgen import stats

_sortq = pytest.importorskip("loadgen._sortq", reason="the C sort is not built here")


@pytest.mark.parametrize(
    "values",
    [
        [],
        [5],
        [2, 1],
        list(range(1000)),
        list(range(1000, 0, -1)),
        [7] * 5000,  # all equal: no quadratic case
        [1, 0] * 3000,
        [-(2**63), 2**63 - 1, 0, -1, 1, -(2**63), 2**63 - 1],
    ],
    ids=["empty", "one", "two", "sorted", "reversed", "equal", "two values", "extremes"],
)
def test_sorts_as_sorted_does(values: list[int]) -> None:
    got = array("q", values)
    _sortq.sort(got)
    assert got.tolist() == sorted(values)


def test_random_arrays_of_every_size() -> None:
    rng = random.Random(3)
    for _ in range(300):
        n = rng.choice([rng.randrange(40), rng.randrange(40, 3000), rng.randrange(3000, 100_000)])
        spread = rng.choice([3, 10**6, 2**62])
        values = [rng.randrange(-spread, spread) for _ in range(n)]
        got = array("q", values)
        _sortq.sort(got)
        assert got.tolist() == sorted(values)


def test_rejects_what_is_not_a_writable_int64_buffer() -> None:
    for bad in (array("i", [1, 2]), array("d", [1.0]), b"12345678", [1, 2]):
        with pytest.raises((TypeError, BufferError)):  # bytes: not writable
            _sortq.sort(bad)


def test_describe_ns_gives_the_same_figures_through_every_sort(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(9)
    values = array("q", (rng.randrange(1, 10**8) for _ in range(20_001)))
    original = values.tolist()
    native = stats.describe_ns(values)
    assert values.tolist() == original  # the caller's array is left as it was
    handed = array("q", values)
    assert stats.describe_ns(handed, own=True) == native
    assert handed.tolist() == sorted(original)  # handed over: sorted in place, no copy
    monkeypatch.setattr(stats, "_sortq", None)
    assert stats.describe_ns(values) == native  # sorted()
    pytest.importorskip("numpy")
    monkeypatch.setattr(stats, "NUMPY_SORT_FROM", 10)
    assert stats.describe_ns(values) == native  # numpy
