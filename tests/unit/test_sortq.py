"""loadgen._sortq: `sort` orders an int64 buffer in place as sorted() orders it; `describe` gives the
exact sums, the extremes and the values at ranks of the sorted order without sorting; describe_ns
gives the same figures through it as through sorted() and numpy."""

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
    assert handed.tolist() != original  # handed over: reordered in place, no copy
    assert sorted(handed) == sorted(original)
    monkeypatch.setattr(stats, "_sortq", None)
    assert stats.describe_ns(values) == native  # sorted()
    pytest.importorskip("numpy")
    monkeypatch.setattr(stats, "NUMPY_SORT_FROM", 10)
    assert stats.describe_ns(values) == native  # numpy


def _expected(values: list[int], ranks: list[int]) -> tuple[int, int, int, int, list[int]]:
    ordered = sorted(values)
    return sum(values), sum(v * v for v in values), ordered[0], ordered[-1], [ordered[r] for r in ranks]


def test_describe_gives_the_sorted_orders_ranks_and_exact_sums() -> None:
    rng = random.Random(5)
    for _ in range(300):
        n = rng.choice([rng.randrange(1, 40), rng.randrange(40, 3000), rng.randrange(3000, 60_000)])
        spread = rng.choice([3, 10**6, 2**40])
        values = [rng.randrange(-spread, spread) for _ in range(n)]
        ranks = sorted(rng.randrange(n) for _ in range(rng.randrange(0, 9)))
        got = array("q", values)
        assert _sortq.describe(got, ranks) == _expected(values, ranks)
        assert sorted(got) == sorted(values)  # reordered, nothing lost


@pytest.mark.parametrize(
    "values",
    [[5], [7] * 5000, [1, 0] * 3000, list(range(5000, 0, -1)), [-(2**63), 2**63 - 1, 0, -1, 1]],
    ids=["one", "equal", "two values", "reversed", "extremes"],
)
def test_describe_on_edge_arrays(values: list[int]) -> None:
    ranks = sorted({0, len(values) // 2, len(values) - 1})
    total, squares, least, most, picked = _sortq.describe(array("q", values), ranks)
    expected = _expected(values, ranks)
    assert (total, least, most, picked) == (expected[0], *expected[2:])
    assert squares == expected[1] or (squares is None and expected[1] >= 2**128)


def test_describe_says_when_the_squares_pass_128_bits() -> None:
    values = [2**63 - 1] * 5  # each square is just under 2^126: four of them pass 2^128
    total, squares, *_ = _sortq.describe(array("q", values), [0])
    assert total == 5 * (2**63 - 1)
    assert squares is None
    monkey = array("q", values)
    figures = stats.describe_ns(monkey, own=True)  # Python's integers take over
    assert figures["std"] == 0.0
    assert figures["count"] == 5


def test_describe_rejects_bad_ranks_and_buffers() -> None:
    for ranks in ([3], [-1], [2, 1], ["a"]):
        with pytest.raises((ValueError, TypeError)):
            _sortq.describe(array("q", [1, 2, 3]), ranks)
    with pytest.raises(ValueError, match="no values"):
        _sortq.describe(array("q"), [])
    for bad in (array("i", [1, 2]), b"12345678"):
        with pytest.raises((TypeError, BufferError)):
            _sortq.describe(bad, [0])
