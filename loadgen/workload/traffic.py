"""Realistic traffic in one place for the runner: which workload a `TrafficConfig` builds, the send
schedule it brings, and the summary blocks it adds (schedule fidelity, sessions)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from loadgen.config import ConfigError, RunConfig
from loadgen.records import RequestRecord
from loadgen.workload.fidelity import schedule_fidelity, session_facts
from loadgen.workload.schedule import build_schedule
from loadgen.workload.traffic_config import SAMPLE_BY, TIME_UNITS, TRACE_FORMATS, TrafficConfig


def check_traffic(t: TrafficConfig, endpoint: str) -> None:
    """One-line ConfigError for the first bad traffic option (called when the config is resolved)."""
    kinds = [name for name in ("trace", "sessions", "sharegpt") if getattr(t, name)]
    if len(kinds) > 1:
        raise ConfigError(f"--{kinds[0]} and --{kinds[1]} are two workloads: give one")
    for name, value, choices in (
        ("--trace-format", t.trace_format, TRACE_FORMATS),
        ("--trace-sample-by", t.trace_sample_by, SAMPLE_BY),
        ("--trace-time-unit", t.trace_time_unit, TIME_UNITS),
    ):
        if value is not None and value not in choices:
            raise ConfigError(f"invalid {name} {value!r}; choose from {', '.join(choices)}")
    if not (t.trace_speedup > 0 and math.isfinite(t.trace_speedup)):
        raise ConfigError(f"invalid --trace-speedup {t.trace_speedup!r}: must be a finite number > 0")
    if t.trace_sample is not None and not 0 < t.trace_sample <= 1:
        raise ConfigError(f"invalid --trace-sample {t.trace_sample!r}: must be in (0, 1]")
    if t.trace_block_size is not None and t.trace_block_size < 1:
        raise ConfigError(f"invalid --trace-block-size {t.trace_block_size!r}: must be >= 1")
    start, end = t.trace_start_s or 0.0, t.trace_end_s
    if start < 0 or (end is not None and end <= start):
        raise ConfigError(f"invalid trace window {start:g}-{end} s: need 0 <= --trace-start < --trace-end")
    if t.trace_sessions and not t.trace:
        raise ConfigError("--trace-sessions replays a trace's conversations: give --trace FILE")
    if t.trace and endpoint == "chat":
        raise ConfigError(
            "--trace sends token-id prompts, which --endpoint chat cannot take; use completions"
        )
    if t.session_rate is not None and not t.session_rate > 0:
        raise ConfigError(f"invalid --session-rate {t.session_rate!r}: must be > 0")
    if t.sessions is not None or t.think_time != "fixed:0":
        from loadgen.workload.thinktime import parse_think_time

        parse_think_time(t.think_time)


def build_traffic_workload(config: RunConfig) -> Any:
    """The workload the traffic options name (a trace, sessions, or a ShareGPT file)."""
    t = config.traffic
    assert t is not None
    if t.trace and t.trace_sessions:
        from loadgen.workload.trace_sessions import build_trace_sessions

        return build_trace_sessions(config)
    if t.trace:
        from loadgen.workload.trace import TraceWorkload

        return TraceWorkload(config)
    if t.sessions == "synthetic":
        from loadgen.workload.sessions import build_synthetic

        return build_synthetic(config)
    if t.sessions:
        from loadgen.workload.sharegpt import build_sharegpt_sessions

        return build_sharegpt_sessions(config)
    from loadgen.workload.sharegpt import ShareGPTWorkload

    return ShareGPTWorkload(config)


def run_schedule(config: RunConfig, workload: Any, limit: int = 1_000_000) -> list[int]:
    """The run's send offsets (ns): the workload's own (a trace's times, sessions' arrivals), else
    the synthetic open-loop schedule of `--rate` / `--arrival`."""
    own: Callable[[], list[int]] | None = getattr(workload, "schedule", None)
    return own() if own is not None else build_schedule(config, limit=limit)


def traffic_summary(workload: Any, records: Sequence[RequestRecord]) -> dict[str, Any]:
    """The summary blocks of a trace replay (`schedule_fidelity`) or of sessions (`sessions`)."""
    name = getattr(workload, "name", None)
    if name == "trace":
        out: dict[str, Any] = {"schedule_fidelity": schedule_fidelity(records, "trace")}
        if any(r.session_id is not None for r in records):  # the trace's conversations, open loop
            out["sessions"] = session_facts(records)
        return out
    if name == "sessions":
        return {
            "sessions": session_facts(records),
            "schedule_fidelity": schedule_fidelity(records, "turn due time"),
        }
    return {}
