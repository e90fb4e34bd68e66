"""Runs one benchmark: preflight, open-loop dispatch, live metrics, then the run record.

`run_benchmark(config)` (async) and `run_benchmark_sync(config)` return a RunResult. Exit codes:
0 ok; 1 the run failed its error budget (`--max-error-rate`) or was interrupted (partial result);
3 some of the run's files could not be written (`RunResult.not_written` names them).
"""

from __future__ import annotations

import contextlib
import math
import signal
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from loadgen.config import ConfigError, RunConfig
from loadgen.records import RunResult
from loadgen.results.rundir import probe_writable
from loadgen.run.client_cpu import not_ours
from loadgen.run.context import OnResult, RunContext
from loadgen.run.measure import route_signals
from loadgen.run.reach import preflight
from loadgen.run.steps import run_steps
from loadgen.targets import get_target
from loadgen.transport import evloop, kernel_stamps
from loadgen.transport.dispatch import connector_limit
from loadgen.transport.plainhttp import PlainSession
from loadgen.transport.rawhttp import RawClient
from loadgen.workload.generator import build_workload
from loadgen.workload.shard import ShardPlan, derived_run_id, shard_section
from loadgen.workload.traffic import run_schedule

LATE_START_S = 1.0  # a shard that starts later than this after --start-at refuses to run


@contextlib.contextmanager
def embedded_engine(config: RunConfig) -> Iterator[str | None]:
    """Start the simulated engine in-process for `--target sim`; yields its base URL."""
    if config.target != "sim" or config.base_url:
        yield config.base_url
        return
    from simengine.embedded import EmbeddedEngine  # imported only when used

    engine = EmbeddedEngine(list(config.sim_args))
    engine.start()
    try:
        with not_ours(engine.cpu_ns):  # the engine's CPU is not the client's (`client_cpu`)
            yield str(engine.base_url)
    finally:
        engine.stop()


async def run_benchmark(
    config: RunConfig,
    *,
    progress: bool = True,
    on_result: OnResult | None = None,
    shard: ShardPlan | None = None,
) -> RunResult:
    """Run the benchmark the config describes and write its record; see the module docstring.

    `on_result` gets the result as soon as the record is written, before the metrics linger; with
    `shard`, only that slice of the schedule is sent, from its common start (loadgen.workload.shard)."""
    from loadgen.results.rundir import new_run_id

    target = get_target(config.target)
    workload = build_workload(config)  # bad datasets fail before anything starts
    check_results_dir(config.results_dir)
    schedule = run_schedule(config, workload)  # a trace's or sessions' own times, else --rate's
    run_id, extra = new_run_id(), dict[str, Any]()
    if shard is not None:
        run_id, extra = sharded(config, shard, workload, schedule)
        schedule = shard.take(schedule)
    with embedded_engine(config) as started_url:
        base_url = (started_url or target.default_base_url or "").rstrip("/")
        limit = connector_limit(config.max_concurrency, config.total_requests, config.rate)
        headers = {"Authorization": f"Bearer {config.api_key}"} if config.api_key else {}
        # the load goes through the raw client or its own aiohttp session; metadata, preflight and
        # the exporter use a plain session (no aiohttp import for a raw-client run)
        async with (
            PlainSession(headers=headers) as meta_session,
            _load_session(config, limit) as session,
        ):
            await preflight(meta_session, target, base_url, config.api_key)
            raw = None
            kernel_stamps.reset_counts()  # this run's arrival stamps (the manifest's client section)
            if session is None:
                # the pool's own cap matters only when it could be reached: not under --max-concurrency
                # (the dispatcher caps first) nor when the run has no more requests than the cap
                cap = 0 if config.max_concurrency or len(schedule) <= limit else limit
                sessions = getattr(workload, "name", None) == "sessions"  # a turn's answer is read back
                raw = RawClient(base_url, config.api_key, cap, config.request_timeout_s, keep_text=sessions)
            ctx = RunContext(
                config,
                run_id,
                target,
                workload,
                schedule,
                base_url,
                progress,
                meta_session,
                session=session,
                raw=raw,
                on_result=on_result,
                shard=shard,
                manifest_extra=extra,
            )
            try:
                return await run_steps(ctx)
            finally:
                if raw is not None:
                    raw.close()


def sharded(
    config: RunConfig, shard: ShardPlan, workload: Any, schedule: list[int]
) -> tuple[str, dict[str, Any]]:
    """The run id all shards share and the manifest's `shard` block (the whole run's fingerprints
    and this slice's); a schedule of unknown length cannot be split (one-line ConfigError)."""
    if config.total_requests is None and math.isinf(config.rate):
        raise ConfigError("a sharded run needs a known schedule: give --num-prompts or a finite --rate")
    if config.traffic is not None and config.traffic.closed_loop:
        raise ConfigError(
            "sessions cannot be sharded (each turn waits for its answer): drop --shard/--workers"
        )
    if shard.start_at is not None:
        late_s = (datetime.now(UTC) - shard.start_at).total_seconds()
        if late_s > LATE_START_S:  # its backlog would go out at once: a burst the schedule never had
            start = shard.start_at.isoformat().replace("+00:00", "Z")
            raise ConfigError(
                f"--start-at {start} passed {late_s:.1f} s ago: nothing sent (pick a later start)"
            )
    section = shard_section(shard, workload, schedule)
    run_id = shard.run_id
    if run_id is None:
        if shard.start_at is None:
            raise ConfigError("a sharded run needs --run-id or --start-at (all shards must agree on it)")
        facts = {**workload.describe(), "schedule": section["run_schedule_fingerprint"]}
        run_id = derived_run_id(shard.start_at, config.seed, facts)
    return run_id, {"shard": section}


def check_results_dir(results_dir: str) -> None:
    """Fail before the run (nothing sent) when results cannot be written there: one line naming it."""
    try:
        probe_writable(Path(results_dir))
    except OSError as exc:
        cause = exc.strerror or type(exc).__name__
        message = f"cannot write results to {results_dir!r} ({cause}): pass another --results-dir"
        raise ConfigError(message) from None


def _load_session(config: RunConfig, limit: int) -> contextlib.AbstractAsyncContextManager[Any]:
    """The aiohttp session that carries the load for `--http-client aiohttp` (None for raw)."""
    if config.http_client != "aiohttp":
        return contextlib.nullcontext(None)
    import aiohttp  # only for --http-client aiohttp (its import is ~0.1 s of CPU)

    from loadgen.transport.stamping import StampingConnector

    return aiohttp.ClientSession(
        connector=StampingConnector(limit=limit, limit_per_host=0, ttl_dns_cache=300),
        timeout=aiohttp.ClientTimeout(total=config.request_timeout_s),
        auto_decompress=False,  # stamped bodies are parsed as sent (requests ask for identity)
        cookie_jar=aiohttp.DummyCookieJar(),
    )


def run_benchmark_sync(
    config: RunConfig,
    *,
    progress: bool = True,
    on_result: OnResult | None = None,
    late_signals: Callable[[signal.Signals], None] | None = None,
    shard: ShardPlan | None = None,
) -> RunResult:
    """Blocking wrapper around `run_benchmark` (its own event loop: uvloop when installed).

    With `late_signals`, SIGINT / SIGTERM outside the run itself (engine start and stop, writing
    the record) go to it instead of raising KeyboardInterrupt: the CLI's second Ctrl-C."""

    async def main() -> RunResult:
        if late_signals is None:
            return await run_benchmark(config, progress=progress, on_result=on_result, shard=shard)
        with route_signals(late_signals):
            return await run_benchmark(config, progress=progress, on_result=on_result, shard=shard)

    return evloop.run(main())
