"""`loadgen diff` and the prefix-cache state: one fact row, first of all when the gap is strong."""

from __future__ import annotations

from typing import Any

import pytest

from loadgen.analysis.diff import manifest_differences
from loadgen.analysis.diff_cache import strong_gap
from loadgen.run.progress import cache_rows


def _manifest(reported: float | None, counters: float | None, implied: float | None, **engine: Any) -> dict:
    return {
        "config": {"endpoint": "completions"},
        "workload": {"name": "shared-prefix", "fingerprint": "f1"},
        "engine": {"engine": "vllm", "version": "0.26.0", "model": "m", **engine},
        "cache": {
            "flushed": None,
            "hit_tokens": 10,
            "queried_tokens": 20,
            "hit_ratio": counters,
            "reported": {"requests_with_details": 3, "cached_tokens": 5, "hit_ratio": reported},
            "implied": {"block_size": 16, "hit_ratio": implied, "prompt_tokens": 99},
        },
    }


@pytest.mark.parametrize(
    ("a", "b", "strong"),
    [
        (0.0, 0.25, True),  # 25 points: strong whatever the prefill work
        (0.85, 0.99, True),  # 14 points, but the prefill left drops 0.15 -> 0.01: 15x
        (0.50, 0.56, False),  # 6 points, prefill 0.50 -> 0.44: 1.1x
        (0.0, 0.10, False),  # 10 points, prefill 1.0 -> 0.9
        (0.97, 0.99, False),  # 2 points: under the 5-point floor even at 3x
    ],
)
def test_strong_gap(a: float, b: float, strong: bool) -> None:
    assert strong_gap(a, b) is strong
    assert strong_gap(b, a) is strong


def test_a_strong_gap_ranks_first_even_before_another_engine_version() -> None:
    cold = _manifest(0.635, 0.64, 0.635)
    warm = _manifest(0.952, 0.95, 0.635, version="0.27.0")
    rows = manifest_differences(cold, warm)
    assert [(r.key, r.group) for r in rows[:2]] == [
        ("cache.hit_ratio", "cache_state"),
        ("engine.version", "version"),
    ]
    first = rows[0]
    assert (first.a, first.b, first.score) == (0.635, 0.952, 1.0)  # the reported ratio comes first
    details = {d.key: (d.a, d.b) for d in first.details}
    assert details == {
        "cache.reported.hit_ratio": (0.635, 0.952),
        "cache.hit_ratio": (0.64, 0.95),
        "cache.implied.hit_ratio": (0.635, 0.635),  # same workload: the engine's cache changed
    }
    # compared once: no other row for any hit ratio or the token counts behind them
    others = [r.key for r in rows[1:]] + [d.key for r in rows[1:] for d in r.details]
    assert not [k for k in others if k.startswith("cache.")]


def test_without_reported_details_the_counters_decide_and_a_weak_gap_is_a_cache_row() -> None:
    a, b = _manifest(None, 0.50, None), _manifest(None, 0.56, None)
    (row,) = manifest_differences(a, b)
    assert (row.key, row.group, row.a, row.b, row.score) == ("cache.hit_ratio", "cache", 0.5, 0.56, 0.75)
    assert manifest_differences(_manifest(None, 0.5, None), _manifest(None, 0.51, None)) == []  # within 2 pts
    # the implied bound alone is no measured cache state (a changed workload has its fingerprint row)
    assert manifest_differences(_manifest(None, None, 0.5), _manifest(None, None, 0.9)) == []


def test_console_shows_the_three_ratios_only_when_there_are_any() -> None:
    cache = _manifest(0.635, 0.64, 0.635)["cache"]
    text = "\n".join(cache_rows(cache))
    assert "Reported per request (3 with details):   63.5%" in text
    assert "Engine cache counters (over the run):    64.0%" in text
    assert "Implied bound (16-token blocks):         63.5%" in text
    assert cache_rows({"hit_ratio": None, "reported": {"hit_ratio": None}, "implied": {}}) == []
