"""Last good engine facts per URL, so a slow optional endpoint makes a fact stale, not missing.

SGLang's `/get_server_info` goes through its scheduler and can take over the poll timeout under load
or while warming up; the engine still answers and is still ready. The facts that endpoint gave last
time are kept and reported with their age (`stale: {"version": 12.3}` in /manifest) until it
answers again. A fact is forgotten when every endpoint answered in time and none stated it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from exporter.engine_http import EngineHttpFacts

KEPT = (
    "engine",
    "version",
    "model",
    "max_model_len",
    "server_info",
    "server_info_path",
    "server_args",
    "reported",
)


def _present(value: Any) -> bool:
    return value not in (None, "", {}, [])


def remember(
    facts: EngineHttpFacts, memory: dict[str, tuple[Any, float]], now: float
) -> tuple[EngineHttpFacts, dict[str, float]]:
    """Pure but for `memory` (updated in place): `facts` with what timed out filled from memory,
    and the age in seconds of each filled fact (server_info_path/server_args count as server_info)."""
    merged = dataclasses.replace(facts)
    stale: dict[str, float] = {}
    for name in KEPT:
        value = getattr(facts, name)
        if _present(value):
            memory[name] = (value, now)
        elif facts.timed_out and name in memory:
            kept, at = memory[name]
            setattr(merged, name, kept)
            if name not in ("server_info_path", "server_args"):
                stale[name] = round(now - at, 1)
        else:
            memory.pop(name, None)
    return merged, stale
