"""Runs one benchmark: preflight, open-loop dispatch, live metrics, then the run record.

`run_benchmark(config)` (async) and `run_benchmark_sync(config)` return a RunResult. Exit codes:
0 ok; 1 the run failed its error budget (`--max-error-rate`) or was interrupted (partial result).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp

import loadgen.run.annotations as grafana_notes
from loadgen.config import ConfigError, RunConfig
from loadgen.records import RunResult
from loadgen.results.manifest import public_url
from loadgen.results.record import ManifestFacts, build_manifest, build_summary, write_run
from loadgen.run import evloop
from loadgen.run.live_metrics import LiveMetrics, RunLabels
from loadgen.run.measure import Run, execute, install_signals, linger, paced_gc
from loadgen.run.reach import preflight
from loadgen.targets import EngineMetadata, Target, get_target
from loadgen.transport.aiohttp_client import finalize
from loadgen.transport.dispatch import Dispatcher, connector_limit
from loadgen.transport.rawhttp import RawClient
from loadgen.transport.stamping import StampingConnector
from loadgen.workload.generator import build_workload, fingerprint
from loadgen.workload.schedule import build_schedule


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
        yield str(engine.base_url)
    finally:
        engine.stop()


def _labels_info(
    config: RunConfig, run_id: str, model: str, meta: EngineMetadata | None, base_url: str
) -> tuple[RunLabels, dict]:
    labels = RunLabels(run_id, config.target, model, config.resolved_scenario)
    info = {
        "engine": (meta.engine if meta else "") or "",
        "engine_version": (meta.version if meta else "") or "",
        "seed": str(config.seed),
        "dataset": config.dataset or config.resolved_workload,
        "experiment_id": config.experiment_id or "",
        "base_url": public_url(base_url),
    }
    return labels, info


async def run_benchmark(config: RunConfig, *, progress: bool = True) -> RunResult:
    """Run the benchmark the config describes and write its record; see the module docstring."""
    from loadgen.results.rundir import new_run_id

    run_id = new_run_id()
    target = get_target(config.target)
    workload = build_workload(config)  # bad datasets fail before anything starts
    schedule = build_schedule(config, limit=1_000_000)
    with embedded_engine(config) as started_url:
        base_url = (started_url or target.default_base_url or "").rstrip("/")
        limit = connector_limit(config.max_concurrency, config.total_requests, config.rate)
        headers = {"Authorization": f"Bearer {config.api_key}"} if config.api_key else {}
        # the load goes through the raw client or its own aiohttp session; metadata, preflight and
        # the exporter use a small plain aiohttp session
        async with (
            aiohttp.ClientSession(headers=headers) as meta_session,
            _load_session(config, limit) as session,
        ):
            await preflight(meta_session, target, base_url, config.api_key)
            raw = None
            if session is None:
                # the pool's own cap matters only when it could be reached: not under --max-concurrency
                # (the dispatcher caps first) nor when the run has no more requests than the cap
                cap = 0 if config.max_concurrency or len(schedule) <= limit else limit
                raw = RawClient(base_url, config.api_key, cap, config.request_timeout_s)
            try:
                return await _run(
                    config,
                    run_id,
                    target,
                    workload,
                    schedule,
                    (meta_session, session),
                    base_url,
                    progress,
                    raw,
                )
            finally:
                if raw is not None:
                    raw.close()


def _load_session(config: RunConfig, limit: int) -> contextlib.AbstractAsyncContextManager[Any]:
    """The aiohttp session that carries the load for `--http-client aiohttp` (None for raw)."""
    if config.http_client != "aiohttp":
        return contextlib.nullcontext(None)
    return aiohttp.ClientSession(
        connector=StampingConnector(limit=limit, limit_per_host=0, ttl_dns_cache=300),
        timeout=aiohttp.ClientTimeout(total=config.request_timeout_s),
        auto_decompress=False,  # stamped bodies are parsed as sent (requests ask for identity)
        cookie_jar=aiohttp.DummyCookieJar(),
    )


async def _run(
    config: RunConfig,
    run_id: str,
    target: Target,
    workload: Any,
    schedule: list[int],
    sessions: tuple[aiohttp.ClientSession, aiohttp.ClientSession | None],
    base_url: str,
    progress: bool,
    raw: RawClient | None = None,
) -> RunResult:
    from loadgen.results.exporter_client import attach_exporter

    meta_session, session = sessions
    meta = await target.fetch_metadata(meta_session, base_url)
    model = config.model or meta.model
    if not model:
        raise ConfigError(f"{base_url}/v1/models lists no model: pass --model")
    async with aiohttp.ClientSession() as plain:  # never send the engine's API key to the exporter
        exporter = await attach_exporter(plain, config.exporter_url, base_url)
    run = Run(config, run_id, progress)
    run.metrics = _start_metrics(config, run_id, model, meta, base_url)
    signals = install_signals(run)
    try:
        started = datetime.now(UTC)
        run.metrics.start_ts.set(started.timestamp())
        tags = [
            "loadgen",
            f"run_id:{run_id}",
            f"target:{config.target}",
            f"scenario:{config.resolved_scenario}",
        ]
        text = f"loadgen run {run_id} ({config.target}, {model})"
        ann_id = await asyncio.to_thread(
            grafana_notes.annotate_run_start,
            config.grafana_url,
            config.grafana_token,
            run_id=run_id,
            tags=tags,
            text=text,
        )
        run.dispatcher = Dispatcher(
            session, lambda p: f"{base_url}{p}", config.api_key, config.max_concurrency, run.on_done, raw=raw
        )
        with paced_gc():
            start_ns, wl_fingerprint = await _execute_or_salvage(run, target, workload, model, schedule)
            ended = datetime.now(UTC)
            run.metrics.end_ts.set(ended.timestamp())
            records = sorted(run.dispatcher.records, key=lambda r: r.index)
            summary = build_summary(
                config,
                run_id,
                records,
                meta,
                model,
                started,
                ended,
                run.stop_reason,
                run.dispatcher.peak_in_flight,
            )
            sent_schedule = schedule[: len(records)]
            facts = ManifestFacts(workload, wl_fingerprint, sent_schedule, meta, base_url, *exporter)
            manifest = build_manifest(config, run_id, facts, started, ended, run.stop_reason)
            result_dir = write_run(Path(config.results_dir), run_id, manifest, summary, records, start_ns)
        await asyncio.to_thread(
            grafana_notes.annotate_run_end,
            config.grafana_url,
            config.grafana_token,
            ann_id,
            run_id=run_id,
            tags=tags,
            text=f"{text} ended",
            start_ms=int(started.timestamp() * 1000),
            end_ms=int(ended.timestamp() * 1000),
        )
        exit_code = 1 if run.stop_reason or summary["error_rate"] > config.max_error_rate else 0
        if config.metrics_port and config.linger_s:
            await linger(run, config.linger_s)
        return RunResult(run_id, result_dir, summary, manifest, summary["partial"], exit_code)
    finally:
        run.metrics.stop()
        for sig in signals:
            asyncio.get_running_loop().remove_signal_handler(sig)


async def _execute_or_salvage(
    run: Run, target: Target, workload: Any, model: str, schedule: list[int]
) -> tuple[int, str]:
    """Run the load; if loadgen itself fails, keep what was measured and mark the record partial."""
    try:
        return await execute(run, target, workload, model, schedule)
    except Exception as exc:  # noqa: BLE001 - a bug of ours must still leave a (partial) record
        run.request_stop(f"loadgen error: {type(exc).__name__}: {exc}")
        assert run.dispatcher is not None
        await run.dispatcher.drain(cancel=True)
        for record in run.dispatcher.records:
            finalize(record)
        return run.start_ns, fingerprint(run.specs)


def _start_metrics(
    config: RunConfig, run_id: str, model: str, meta: EngineMetadata, base_url: str
) -> LiveMetrics:
    labels, info = _labels_info(config, run_id, model, meta, base_url)
    metrics = LiveMetrics(labels, info)
    if config.metrics_port:
        try:
            metrics.serve(config.metrics_port, config.metrics_listen_address)
        except OSError as exc:
            raise ConfigError(
                f"cannot serve metrics on {config.metrics_listen_address} port {config.metrics_port} "
                f"({exc.strerror}): pass another --metrics-port or --metrics-listen-address, or 0 to disable"
            ) from None
    metrics.target_rate.set(config.rate)
    metrics.max_concurrency.set(config.max_concurrency or 0)
    return metrics


def run_benchmark_sync(config: RunConfig, *, progress: bool = True) -> RunResult:
    """Blocking wrapper around `run_benchmark` (its own event loop: uvloop when installed)."""
    return evloop.run(run_benchmark(config, progress=progress))
