"""Issue 11 item 5: the engine's own prefix-cache counters, read from the real engines' captures."""

from __future__ import annotations

from pathlib import Path

import pytest

from infergauge import engines
from loadgen.targets.cache_counters import (
    WARM_HIT_RATIO,
    CacheCounters,
    cache_facts,
    cache_warning,
    parse_counters,
    spec_for,
)


def _body(path: Path) -> str:
    """The /metrics body of a capture (the file starts with the HTTP response head)."""
    return path.read_text().split("\n\n", 1)[1]


def _sample(text: str, name: str) -> float:
    """The one sample of `name` in a capture, found by hand (independent of the parser under test)."""
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name + "{"))


@pytest.mark.parametrize(
    ("engine", "hits", "queried"),
    [
        ("vllm", "vllm:prefix_cache_hits_total", "vllm:prefix_cache_queries_total"),
        ("sglang", "sglang:cached_tokens_total", "sglang:prompt_tokens_total"),
    ],
)
def test_counters_are_read_from_the_real_capture(request, engine: str, hits: str, queried: str) -> None:
    folder: Path = request.getfixturevalue(f"golden_{engine}")
    text = _body(folder / "metrics_2_after.txt")
    counters = parse_counters(engines.get(engine), text)
    assert counters == CacheCounters(_sample(text, hits), _sample(text, queried))
    assert counters.hit_tokens > 0


def test_idle_sglang_has_no_counters_yet_and_reads_as_zero(golden_sglang: Path) -> None:
    # SGLang creates its token counters at the first request: an idle engine's are zero, not unknown
    text = _body(golden_sglang / "metrics_0_idle.txt")
    assert "sglang:prompt_tokens_total" not in text
    assert parse_counters(engines.get("sglang"), text) == CacheCounters(0.0, 0.0)


def test_a_body_that_is_not_prometheus_text_gives_none(golden_sglang: Path) -> None:
    head_and_body = (golden_sglang / "metrics_0_idle.txt").read_text()  # starts `HTTP/1.1 200 OK`
    assert parse_counters(engines.get("sglang"), head_and_body) is None
    assert parse_counters(engines.get("simengine"), "# x\n") is None  # no counters of its own


def test_facts_are_the_difference_of_two_readings() -> None:
    # hit_ratio = (300 - 100) / (1400 - 600) = 200 / 800 = 0.25
    facts = cache_facts([CacheCounters(100, 600), CacheCounters(300, 1400)])
    assert facts == {"hit_tokens": 200, "queried_tokens": 800, "hit_ratio": 0.25}


def test_a_missing_reading_gives_no_facts() -> None:
    assert cache_facts([None, CacheCounters(1, 2)])["hit_ratio"] is None
    assert cache_facts([CacheCounters(1, 2)])["hit_tokens"] is None
    assert cache_facts([CacheCounters(1, 2), CacheCounters(1, 2)])["hit_ratio"] is None  # nothing queried


def test_spec_for_prefers_the_spoken_engine() -> None:
    assert spec_for("sglang", "simengine") is engines.get("sglang")
    assert spec_for(None, "vllm") is engines.get("vllm")
    assert spec_for(None, "tgi") is None


def test_a_cold_run_that_was_warm_is_warned_about() -> None:
    warm = {"hit_tokens": 750, "queried_tokens": 1000, "hit_ratio": 0.75}
    text = cache_warning("r1", {**warm, "flushed": True, "method": "restart"})
    assert text is not None
    assert "750 of 1000 prompt tokens (75%)" in text
    assert "meant to be cold (restart)" in text
    unflushed = cache_warning("r1", {**warm, "flushed": None})
    assert unflushed is not None
    assert "not cleared before it (no flush asked)" in unflushed


def test_a_cold_run_is_not_warned_about() -> None:
    assert cache_warning("r1", {"hit_ratio": WARM_HIT_RATIO, "flushed": True}) is None
    assert cache_warning("r1", {"hit_ratio": None}) is None
