"""A trace's conversations replayed as sessions (`--trace F --trace-sessions`): the rows that share a
session id (Alibaba's chat chains, infergauge's `session_id`; a row without one is a session of its
own) are the turns of one session, in trace order. Turn 0 arrives at its trace time (open loop);
turn k+1 is due at its own trace time, or as soon as turn k's answer has ended when that is later
(closed loop with the recorded timing), or, with `--think-time`, that long after the answer.
Each turn's prompt is its hash-id blocks (loadgen.workload.trace), which stand for the
conversation the trace recorded: the reuse a cache sees is the trace's.
"""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Any

from loadgen.config import RunConfig
from loadgen.workload.sessions import SessionPlan, SessionWorkload, Turn
from loadgen.workload.thinktime import parse_think_time
from loadgen.workload.trace import Planned, TraceWorkload, prompt_tokens


def _group(planned: list[Planned]) -> list[list[tuple[int, Planned]]]:
    """(replay index, planned row) of each session, sessions in order of their first row."""
    groups: dict[str, list[tuple[int, Planned]]] = defaultdict(list)
    for i, p in enumerate(planned):
        groups[p.row.session if p.row.session is not None else f"row{p.row.line}"].append((i, p))
    return sorted(groups.values(), key=lambda g: g[0][0])


def build_trace_sessions(config: RunConfig) -> SessionWorkload:
    """Sessions from the trace's conversations (see the module docstring)."""
    assert config.traffic is not None
    trace = TraceWorkload(config)
    think = parse_think_time(config.traffic.think_time) if config.traffic.think_time != "fixed:0" else None
    plans, first = [], 0
    for s, group in enumerate(_group(trace.planned)):
        rng, turns = random.Random(f"{config.seed}:session:{s}"), []
        for k, (i, p) in enumerate(group):
            ids = prompt_tokens(config.seed, i, p.row.input_len, p.row.hash_ids, trace.block_size)
            recorded = None if think is not None else p.offset_ns
            think_s = think.sample(rng) if think is not None and k else 0.0
            turns.append(Turn(ids, p.row.output_len, think_s, recorded, whole=True))
        session = group[0][1].row.session or f"row{group[0][1].row.line}"
        plans.append(SessionPlan(session, group[0][1].offset_ns, tuple(turns), first))
        first += len(turns)
    facts: dict[str, Any] = {
        **{k: v for k, v in trace.describe().items() if k not in ("name", "definition_fingerprint")},
        "name": "sessions",
        "source": "trace",
        "turn_timing": "recorded" if think is None else str(think),
    }
    facts.pop("request_sequence_sha256", None)  # the sessions' own (over the same prompts) replaces it
    return SessionWorkload(config, plans, facts)
