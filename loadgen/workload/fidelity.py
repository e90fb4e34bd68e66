"""Summary blocks of realistic traffic, pure functions over the run's records.

- schedule fidelity of a replay: lateness = actual send - the trace's send time (scheduled_ns), for
  every measured request that was sent; p50 / p99 / max in seconds (any --max-concurrency slot
  wait counts as lateness here: the trace said "now");
- sessions: TTFT by turn index (turn 0 is the first) and session duration = the last turn's last
  token - the first turn's send, over the sessions whose every turn finished ok.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from loadgen.records import RequestRecord
from loadgen.stats import NS, describe, percentile, ttft_s


def schedule_fidelity(records: Sequence[RequestRecord], reference: str) -> dict[str, Any]:
    """`{"reference": ..., "requests": n, "lateness_s": {p50, p99, max, mean}}` of the measured sends."""
    late = sorted(
        (r.sent_ns - r.scheduled_ns) / NS for r in records if not r.warmup and r.sent_ns and r.scheduled_ns
    )
    if not late:
        return {"reference": reference, "requests": 0, "lateness_s": None}
    return {
        "reference": reference,
        "requests": len(late),
        "lateness_s": {
            "p50": percentile(late, 50),
            "p99": percentile(late, 99),
            "max": late[-1],
            "mean": sum(late) / len(late),
        },
    }


def session_facts(records: Sequence[RequestRecord]) -> dict[str, Any]:
    """TTFT by turn index and session duration (seconds) of the runs' sessions."""
    by_turn: dict[int, list[float]] = defaultdict(list)
    sessions: dict[str, list[RequestRecord]] = defaultdict(list)
    for r in records:
        if r.session_id is None or r.turn_index is None or r.warmup:
            continue
        sessions[r.session_id].append(r)
        value = ttft_s(r) if r.outcome == "ok" else None
        if value is not None:
            by_turn[r.turn_index].append(value)
    durations = []
    for turns in sessions.values():
        if all(t.outcome == "ok" and t.last_ns is not None for t in turns):
            first = min(t.sent_ns for t in turns)
            last = max(t.last_ns or 0 for t in turns)
            durations.append((last - first) / NS)
    return {
        "sessions": len(sessions),
        "sessions_complete": len(durations),
        "turns": sum(len(t) for t in sessions.values()),
        "ttft_by_turn_s": {str(k): describe(v) for k, v in sorted(by_turn.items())},
        "session_duration_s": describe(durations),
    }


def traffic_lines(summary: dict[str, Any]) -> list[str]:
    """The console lines of a replay's fidelity and of sessions (empty for other workloads)."""
    lines = []
    fidelity = summary.get("schedule_fidelity") or {}
    late = fidelity.get("lateness_s")
    if late:
        what = "trace lateness" if fidelity.get("reference") == "trace" else "turn lateness"
        lines.append(
            f"{what} (send - due, ms):{'':<16} p50 {late['p50'] * 1e3:.3f}  p99 {late['p99'] * 1e3:.3f}  "
            f"max {late['max'] * 1e3:.3f}"
        )
    sessions = summary.get("sessions")
    if sessions:
        by_turn = sessions.get("ttft_by_turn_s") or {}
        means = ", ".join(
            f"{k}: {v['mean'] * 1e3:.1f}" for k, v in by_turn.items() if v.get("mean") is not None
        )
        duration = (sessions.get("session_duration_s") or {}).get("p50")
        done, total = sessions["sessions_complete"], sessions["sessions"]
        lines.append(f"sessions: {done}/{total} complete, {sessions['turns']} turns")
        lines.append(f"mean TTFT by turn (ms): {means}")
        if duration is not None:
            lines.append(f"median session duration (s): {duration:.3f}")
    return lines
