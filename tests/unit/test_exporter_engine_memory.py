"""Last good engine facts: kept with their age while their endpoint times out, forgotten once every
endpoint answered in time without them (pure, no network)."""

from __future__ import annotations

from typing import Any

from exporter.engine_http import Answer, EngineHttpFacts, facts_from_answers
from exporter.engine_memory import remember

URL = "http://127.0.0.1:30000"
INFO = {"tp_size": 1, "max_running_requests": 8, "version": "0.5.14"}


def test_a_timed_out_fact_is_kept_with_its_age_then_forgotten_when_truly_gone() -> None:
    memory: dict[str, tuple[Any, float]] = {}
    answered = EngineHttpFacts(URL, up=True, engine="sglang", version="0.5.14", server_info=INFO)
    assert remember(answered, memory, now=100.0)[1] == {}

    slow = EngineHttpFacts(URL, up=True, engine="sglang", timed_out=["/get_server_info"])
    kept, stale = remember(slow, memory, now=112.3)
    assert (kept.version, kept.server_info) == ("0.5.14", INFO)
    assert stale == {"version": 12.3, "server_info": 12.3}  # 112.3 - 100.0

    gone = EngineHttpFacts(URL, up=True, engine="sglang")  # all answered in time, none said it
    fresh, stale = remember(gone, memory, now=120.0)
    assert (fresh.version, stale) == (None, {})
    assert "version" not in memory


def test_answering_and_ready_are_told_apart() -> None:
    starting = facts_from_answers(URL, {"/health": Answer(503), "/v1/models": Answer(200, {"data": []})})
    assert (starting.up, starting.ready) == (True, False)
    ready = facts_from_answers(URL, {"/health": Answer(200), "/get_server_info": None})
    assert (ready.up, ready.ready, ready.timed_out) == (True, True, ["/get_server_info"])
    silent = facts_from_answers(URL, {"/health": None, "/v1/models": None})
    assert (silent.up, silent.ready) == (False, False)
