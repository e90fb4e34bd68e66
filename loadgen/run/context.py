"""One run's state, frozen: what is known before it starts (RunContext, made whole by one
constructor in runner.py) and what each step returns (Prepared, Announced, Measured): no step
patches another's object."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from loadgen.config import RunConfig
from loadgen.records import EngineMetadata, RunResult
from loadgen.targets import Target
from loadgen.targets.cache_counters import CacheCounters
from loadgen.transport.plainhttp import HttpSession
from loadgen.transport.rawhttp import RawClient
from loadgen.workload.shard import ShardPlan

if TYPE_CHECKING:
    import aiohttp

OnResult = Callable[[RunResult], None]


@dataclass(frozen=True)
class RunContext:
    """What is known of one run before it starts, made whole by one constructor (runner.py); each
    step returns what it learns (Prepared, Announced, Measured) instead of patching this."""

    config: RunConfig
    run_id: str
    target: Target
    workload: Any
    schedule: list[int]
    base_url: str
    progress: bool
    meta_session: HttpSession  # metadata, preflight, cache counters
    session: aiohttp.ClientSession | None = None  # the load's aiohttp session (None: raw client)
    raw: RawClient | None = None
    on_result: OnResult | None = None
    shard: ShardPlan | None = None  # this process sends one slice of the run (loadgen.workload.shard)
    manifest_extra: dict[str, Any] = field(default_factory=dict)  # top-level manifest blocks (`shard`)


@dataclass(frozen=True)
class Prepared:
    """What `prepare` learned: the engine's metadata and model, the exporter's manifest, the start."""

    meta: EngineMetadata
    model: str
    exporter: tuple[dict[str, Any] | None, str]
    started: datetime
    counters_start: CacheCounters | None  # the engine's /metrics prefix-cache counters at the start

    def text(self, ctx: RunContext) -> str:
        """The Grafana annotation text of this run."""
        return f"loadgen run {ctx.run_id} ({ctx.config.target}, {self.model})"


@dataclass(frozen=True)
class Announced:
    """The run's Grafana annotation (its tags and id)."""

    tags: list[str]
    ann_id: Any


@dataclass(frozen=True)
class Measured:
    """What `measure` stamped: the run's start (perf_counter ns), what was sent, the end."""

    start_ns: int
    fingerprint: str
    ended: datetime
    counters_end: CacheCounters | None
