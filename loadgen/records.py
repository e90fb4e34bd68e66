"""Plain types every layer shares: one request's record, the outcomes, a run's result.

Standard library only, so statistics, live metrics, results and both transports import it without
pulling in a transport (`python -c "import loadgen.stats"` needs no aiohttp).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

OUTCOMES = ("ok", "http_error", "timeout", "connect_error", "disconnect", "protocol_error", "cancelled")
# stopped by loadgen itself (a stop, --max-error-rate, Ctrl-C): neither a success nor a failure
SELF_CANCELLED = "cancelled"


@dataclass(slots=True)
class RequestRecord:
    """Timestamps (perf_counter ns) and counts of one request; outcome None until it finishes."""

    index: int
    x_request_id: str
    warmup: bool
    scheduled_ns: int
    input_len: int
    output_len: int
    sent_ns: int = 0
    first_ns: int | None = None
    last_ns: int | None = None
    done_ns: int | None = None
    token_ns: Sequence[int] = field(default_factory=list)  # arrival of each token-bearing chunk
    prompt_tokens: int | None = None
    cached_tokens: int | None = None  # usage.prompt_tokens_details.cached_tokens; None: not sent
    output_tokens: int = 0
    token_count: str = "usage"
    outcome: str | None = None
    http_status: int | None = None
    error: str | None = None
    raw: list[tuple[int, bytes]] | None = None  # stamped body until `finalize` parses it
    fallback: tuple[str, str] | None = None  # (outcome, error) of a stream cut short
    slot_free_ns: int = 0  # when a --max-concurrency slot came free for it, if it had to wait; else 0
    host_stall_ns: int = 0  # event-loop stall (>= 50 ms) inside [sent, done]: loadgen's, not the engine's
    session_id: str | None = None  # the conversation this request is a turn of (sessions, traces)
    turn_index: int | None = None  # its turn in that conversation, 0 first

    @property
    def due_ns(self) -> int:
        """When the request was due: max(scheduled send, the moment its concurrency slot came free)."""
        return max(self.scheduled_ns, self.slot_free_ns)

    @property
    def schedule_lag_ns(self) -> int:
        """The client's own lateness: actual send minus due time (slot wait excluded)."""
        return self.sent_ns - self.due_ns

    @property
    def slot_wait_ns(self) -> int:
        """Time spent waiting for a --max-concurrency slot: due time minus scheduled send."""
        return self.due_ns - self.scheduled_ns


@dataclass(frozen=True)
class RunResult:
    """What a finished (or interrupted) run produced."""

    run_id: str
    result_dir: Path
    summary: dict[str, Any]
    manifest: dict[str, Any]
    partial: bool
    exit_code: int
    not_written: dict[str, str] = field(default_factory=dict)  # file name -> why it was not written


def mark_cut_short(record: RequestRecord, reads: list[tuple[int, bytes]], outcome: str, error: str) -> None:
    """A request that ended without a complete response: keep its reads for parsing later and the
    outcome it gets when the reads do not say otherwise (stamped now)."""
    record.done_ns = time.perf_counter_ns()
    record.raw, record.fallback = reads, (outcome, error)


@dataclass(frozen=True)
class EngineMetadata:
    """Facts the engine reports about itself over HTTP."""

    engine: str
    version: str | None = None
    model: str | None = None
    max_model_len: int | None = None
    server_args: dict[str, Any] = field(default_factory=dict)
    models: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    speaks: str | None = None  # the engine its metadata bodies were recognised as (detect_http)
    server_info_path: str = ""  # the endpoint server_args came from
    asked_engine: str | None = None  # the --target preset, when the server answered as another engine
    reported: dict[str, Any] = field(default_factory=dict)  # args its info metric states (cache_config_info)
