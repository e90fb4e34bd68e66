"""One run in three steps over a RunContext: prepare (engine metadata, the exporter's manifest,
live metrics, the start annotation), measure (the load), record (summary, manifest, files). The
context is frozen; each step returns what it learned (Prepared, Announced, Measured)."""

from __future__ import annotations

import asyncio
import sys
from array import array
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import loadgen.run.annotations as grafana_notes
from loadgen.config import NO_EXPORTER, ConfigError, RunConfig
from loadgen.records import EngineMetadata, RequestRecord, RunResult
from loadgen.results.journal import Journal
from loadgen.results.manifest import public_url, unknown_params
from loadgen.results.manifest_schema import read_manifest
from loadgen.results.prompt_cache import engine_block_size, run_cache_facts, sent_blocks
from loadgen.results.record import ManifestFacts, build_manifest, write_run
from loadgen.results.rundir import write_json
from loadgen.results.summary import build_summary
from loadgen.run.context import Announced, Measured, Prepared, RunContext
from loadgen.run.engine_tokenize import measure_on_engine
from loadgen.run.measure import Run, execute, linger, paced_gc, route_signals
from loadgen.run.unserved_metrics import UnservedMetrics
from loadgen.targets import Target
from loadgen.targets.cache_counters import CacheCounters, engine_counters
from loadgen.targets.preset import mismatch_warning
from loadgen.transport.dispatch import Dispatcher
from loadgen.transport.finish import finalize
from loadgen.transport.plainhttp import PlainSession
from loadgen.workload.traffic import traffic_summary

if TYPE_CHECKING:
    from loadgen.run.live_metrics import LiveMetrics, RunLabels

EXIT_NOT_WRITTEN = 3  # the run was measured but some of its files could not be written


async def run_steps(ctx: RunContext) -> RunResult:
    """prepare (metadata, exporter, live metrics, annotation), measure (the load), record (files)."""
    prep, run = await _prepare(ctx)
    try:
        with route_signals(run.on_signal):
            announced = await _announce(ctx, prep, run)
            with paced_gc():
                measured = await _measure(ctx, prep, run)
                result = _record(ctx, prep, measured, run)
            await _finish(ctx, prep, announced, measured, run, result)
            return result
    finally:
        assert run.metrics is not None
        run.metrics.stop()


async def _prepare(ctx: RunContext) -> tuple[Prepared, Run]:
    """Engine metadata and model, the exporter's manifest, the run state and its live metrics."""
    from loadgen.targets.exporter_client import attach_exporter, attached_line

    meta = await ctx.target.fetch_metadata(ctx.meta_session, ctx.base_url)
    mismatch = mismatch_warning(meta, ctx.base_url)
    if mismatch:
        print(mismatch, file=sys.stderr, flush=True)
    model = ctx.config.model or meta.model or ""
    if not model:
        raise ConfigError(f"{ctx.base_url}/v1/models lists no model: pass --model")
    async with PlainSession() as plain:  # never send the engine's API key to the exporter
        exporter = await attach_exporter(plain, ctx.config.exporter_url, ctx.base_url)
    named = ctx.config.exporter_url not in (None, NO_EXPORTER)  # `none`: the user chose no exporter
    if exporter[0] is not None or named or (ctx.config.target != "sim" and ctx.config.exporter_url is None):
        print(attached_line(*exporter), file=sys.stderr, flush=True)  # the embedded sim has none
    counters = await _read_cache_counters(ctx, meta)
    ctx.workload.clip_to_model_len(meta.max_model_len)  # before the first request is drawn
    await measure_on_engine(ctx.workload, ctx.meta_session, ctx.base_url, model)  # --tokenizer engine
    shard = ctx.shard
    indices = None if shard is None else shard.indices(shard.index + len(ctx.schedule) * shard.count)
    start_at = None if shard is None else shard.start_at
    run = Run(ctx.config, ctx.run_id, ctx.progress, indices=indices, start_at=start_at)
    started = datetime.now(UTC)
    if start_at is not None:  # shards start together: at start_at
        started = max(started, start_at)
    prep = Prepared(meta, model, exporter, started, counters)
    # bound before the run folder exists: a busy --metrics-port leaves no ghost `running` record
    run.metrics = _start_metrics(ctx.config, ctx.run_id, model, meta, ctx.base_url)
    try:
        run.journal, block_size = _start_record(ctx, prep, run.release)
    except BaseException:
        run.metrics.stop()
        raise
    run.kept = sent_blocks(ctx.workload, block_size)  # the implied cache figures' prompt blocks
    if run.kept is not None:
        run.sent.also = run.kept.add
    return prep, run


def _start_record(
    ctx: RunContext, prep: Prepared, on_written: Callable[[RequestRecord], None]
) -> tuple[Journal, int | None]:
    """manifest.json marked `status: running` before the first request, and the journal (with the
    engine's block size, from the same facts)."""
    run_dir = Path(ctx.config.results_dir) / ctx.run_id
    facts = ManifestFacts(ctx.workload, "", [], prep.meta, ctx.base_url, *prep.exporter)
    manifest = build_manifest(ctx.config, ctx.run_id, facts, prep.started, prep.started, None)
    manifest.update(ctx.manifest_extra, status="running", ended_at=None)
    unknown = unknown_params(read_manifest(manifest).engine.param_sources)
    if unknown:
        print(
            f"warning: engine facts unknown: {', '.join(unknown)} (launch flags not read: "
            "attach an exporter that watches the engine, or serve its server info)",
            file=sys.stderr,
            flush=True,
        )
    try:
        write_json(run_dir / "manifest.json", manifest)
    except OSError as exc:
        raise ConfigError(
            f"cannot write {str(run_dir / 'manifest.json')!r} ({exc.strerror}): pass another --results-dir"
        ) from None
    return Journal(run_dir / "requests.jsonl", on_written), engine_block_size(manifest)


async def _read_cache_counters(ctx: RunContext, meta: EngineMetadata) -> CacheCounters | None:
    """The engine's prefix-cache counters now (from its /metrics), kept for the run's `cache` facts."""
    return await engine_counters(ctx.meta_session, ctx.base_url, meta.speaks, meta.engine)


async def _announce(ctx: RunContext, prep: Prepared, run: Run) -> Announced:
    """Mark the start (live metrics, Grafana annotation) and build the dispatcher."""
    config, run_id = ctx.config, ctx.run_id
    assert run.metrics is not None
    run.metrics.start_ts.set(prep.started.timestamp())
    tags = [
        "loadgen",
        f"run_id:{run_id}",
        f"target:{config.target}",
        f"scenario:{config.resolved_scenario}",
    ]
    ann_id = None  # no Grafana: no annotation, and no thread started to make none (~0.4 ms)
    if config.grafana_url:
        ann_id = await asyncio.to_thread(
            grafana_notes.annotate_run_start,
            config.grafana_url,
            config.grafana_token,
            run_id=run_id,
            tags=tags,
            text=prep.text(ctx),
        )
    base_url = ctx.base_url
    run.dispatcher = Dispatcher(
        ctx.session,
        lambda p: f"{base_url}{p}",
        config.api_key,
        config.max_concurrency,
        run.on_done,
        raw=ctx.raw,
        on_sent=run.metrics.observe_sent if run.metrics.address is not None else None,
    )
    return Announced(tags, ann_id)


async def _measure(ctx: RunContext, prep: Prepared, run: Run) -> Measured:
    """Send the load and wait for it (or salvage what was measured); stamps the end."""
    start_ns, fingerprint = await _execute_or_salvage(run, ctx.target, ctx.workload, prep.model, ctx.schedule)
    ended = datetime.now(UTC)
    counters = await _read_cache_counters(ctx, prep.meta)
    if run.journal is not None:
        run.journal.flush()
        run.journal.close()
    assert run.metrics is not None
    run.metrics.end_ts.set(ended.timestamp())
    return Measured(start_ns, fingerprint, ended, counters)


def _record(ctx: RunContext, prep: Prepared, measured: Measured, run: Run) -> RunResult:
    """Build the summary and manifest and write the run's files."""
    config, run_id = ctx.config, ctx.run_id
    assert run.dispatcher is not None
    records = sorted(run.dispatcher.records, key=lambda r: r.index)
    itl_ns, itl_missing = journaled_itls(run.journal, records, run.gaps)
    summary = build_summary(
        config,
        run_id,
        records,
        prep.meta,
        prep.model,
        prep.started,
        measured.ended,
        run.stop_reason,
        run.dispatcher.peak_in_flight,
        itl_ns,
    )
    summary["client_saturated"] = run.backlog.report()
    summary["host_stalls"] = run.stalls.report(records)
    if (cpu := run.cpu.report(len(records))) is not None:
        summary["client_cpu"] = cpu
    summary.update(traffic_summary(ctx.workload, records))
    if itl_missing is not None:
        summary["itl_s"]["incomplete"] = f"ITLs of journaled requests unreadable: {itl_missing}"
    sent_schedule = ctx.schedule[: len(records)]
    facts = ManifestFacts(
        ctx.workload, measured.fingerprint, sent_schedule, prep.meta, ctx.base_url, *prep.exporter
    )
    manifest = build_manifest(config, run_id, facts, prep.started, measured.ended, run.stop_reason)
    manifest.update(ctx.manifest_extra)
    counters = [prep.counters_start, measured.counters_end]
    summary["cache"] = run_cache_facts(
        counters, records, ctx.workload, engine_block_size(manifest), summary["total_input_tokens"], run.kept
    )
    manifest["cache"] = {**manifest["cache"], **summary["cache"]}
    lines = run.journal.lines() if run.journal is not None else None
    try:
        written = write_run(
            Path(config.results_dir), run_id, manifest, summary, records, measured.start_ns, lines
        )
    finally:
        if lines is not None:
            lines.close()
    exit_code = 1 if run.stop_reason or summary["error_rate"] > config.max_error_rate else 0
    if written.not_written:
        exit_code = EXIT_NOT_WRITTEN
    return RunResult(
        run_id, written.run_dir, summary, manifest, summary["partial"], exit_code, written.not_written
    )


def journaled_itls(
    journal: Journal | None, records: list[RequestRecord], kept: array[int] | None = None
) -> tuple[array[int], str | None]:
    """The ITLs (ns) of the measured ok requests whose per-token times were released to the journal
    (the others' are still on their records and `summarize` adds them), and why some could not be
    read back (None when all were): `kept` when the run held them all (`Run.release`), else read back."""
    if kept is not None:
        return kept, None
    itl_ns: array[int] = array("q")
    if journal is None or not journal.where:
        return itl_ns, None
    wanted = {r.index for r in records if not r.warmup and r.outcome == "ok"}
    try:
        journal.read_itls(wanted, itl_ns)
    except OSError as exc:  # the file went away under the run (requests.jsonl is then not written either)
        return itl_ns, f"{journal.path}: {exc.strerror or type(exc).__name__}"
    return itl_ns, None


async def _finish(
    ctx: RunContext, prep: Prepared, announced: Announced, measured: Measured, run: Run, result: RunResult
) -> None:
    """Hand the result over (`on_result`), close the Grafana annotation, keep /metrics up."""
    if ctx.on_result is not None:
        ctx.on_result(result)
    if ctx.config.grafana_url:
        await _annotate_end(ctx, prep, announced, measured)
    if ctx.config.metrics_port and ctx.config.linger_s:
        await linger(run, ctx.config.linger_s)


async def _annotate_end(ctx: RunContext, prep: Prepared, announced: Announced, measured: Measured) -> None:
    """Close the run's Grafana annotation (a thread: the request blocks)."""
    await asyncio.to_thread(
        grafana_notes.annotate_run_end,
        ctx.config.grafana_url,
        ctx.config.grafana_token,
        announced.ann_id,
        run_id=ctx.run_id,
        tags=announced.tags,
        text=f"{prep.text(ctx)} ended",
        start_ms=int(prep.started.timestamp() * 1000),
        end_ms=int(measured.ended.timestamp() * 1000),
    )


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
        return run.start_ns, run.sent.value()


def _labels_info(
    config: RunConfig, run_id: str, model: str, meta: EngineMetadata | None, base_url: str
) -> tuple[RunLabels, dict]:
    from loadgen.run.live_metrics import RunLabels

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


def _start_metrics(
    config: RunConfig, run_id: str, model: str, meta: EngineMetadata, base_url: str
) -> LiveMetrics | UnservedMetrics:
    if not config.metrics_port:  # nobody can read them: no prometheus_client, nothing per request
        return UnservedMetrics()
    from loadgen.run.live_metrics import LiveMetrics

    labels, info = _labels_info(config, run_id, model, meta, base_url)
    metrics = LiveMetrics(labels, info)
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
