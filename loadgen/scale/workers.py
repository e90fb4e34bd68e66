"""`loadgen run --workers N`: one coordinator, N worker processes on this host, one run.

The coordinator owns the run id, the common start, the progress line, the one /metrics endpoint
(the workers' sum, loadgen.run.metrics_sum) and the final record; worker i runs shard i/N of the
schedule (multiprocessing spawn) into a temporary shard folder, and the coordinator merges their
records with `loadgen merge`'s code. `--max-concurrency C` is split C // N, the first C % N workers
one more: each worker queues its own requests, so a request can wait for a slot in its worker while
another worker has one free (the total in flight never exceeds C). Each worker runs on its own core,
and the coordinator on one more when there are enough (loadgen.scale.pinning; the manifest's
`workers.cores` says which)."""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import socket
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from loadgen.config import ConfigError, RunConfig
from loadgen.records import RunResult
from loadgen.results.manifest_schema import read_manifest
from loadgen.results.merge import merge, write_merged
from loadgen.results.rundir import new_run_id
from loadgen.results.shard_record import read_shard
from loadgen.run.runner import check_results_dir, embedded_engine
from loadgen.scale.coordinate import Coordinator
from loadgen.scale.orphans import die_with_parent, note_coordinator
from loadgen.scale.pinning import CorePlan, pin, plan_cores, usable_cores
from loadgen.workload.shard import ShardPlan, parse_start_at

START_LEAD_S = 2.0  # spawn, import and preflight before the common start
START_LEAD_PER_WORKER_S = 0.25
# before its start each worker generates the whole sequence once for the run's fingerprint (about
# 0.15 ms a medium request on the development VM); twice that, so a loaded host is not late
START_LEAD_PER_REQUEST_S = 0.0003


def start_lead_s(workers: int, requests: int) -> float:
    """Seconds from now to the common start: spawn, import, preflight and the run's fingerprint."""
    return START_LEAD_S + START_LEAD_PER_WORKER_S * workers + START_LEAD_PER_REQUEST_S * requests


def concurrency_shares(total: int | None, workers: int) -> list[int | None]:
    """`--max-concurrency` per worker: total // workers, the first total % workers one more."""
    if total is None:
        return [None] * workers
    if total < workers:
        raise ConfigError(f"invalid --max-concurrency {total}: below --workers {workers} (each needs a slot)")
    return [total // workers + (i < total % workers) for i in range(workers)]


def free_port() -> int:
    """A loopback port free now (each worker's private /metrics)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def worker_configs(
    config: RunConfig, base_url: str | None, workers: int, tmp: Path, serve: bool = True
) -> list[RunConfig]:
    """Each worker's config: the shared engine, its concurrency share, its own folder, and its own
    loopback /metrics when `serve` (someone reads it: the coordinator's /metrics or progress line)."""
    shares = concurrency_shares(config.max_concurrency, workers)
    return [
        dataclasses.replace(
            config,
            base_url=base_url,
            max_concurrency=shares[i],
            results_dir=str(tmp / f"shard-{i}"),
            metrics_port=free_port() if serve else 0,
            metrics_listen_address="127.0.0.1",
            linger_s=0.0,
            grafana_url=None,  # the coordinator's run is the one annotated (not N times)
        )
        for i in range(workers)
    ]


def worker_main(
    config: RunConfig, plan: ShardPlan, results: Any, core: int | None = None, parent: int | None = None
) -> None:
    """One worker process on its core: its shard of the run; reports (index, exit code, run folder
    or error). It stops (SIGTERM: a partial record) when its coordinator `parent` dies."""
    if parent is not None:
        die_with_parent(parent)
    pin(None if core is None else [core])
    from loadgen.run.runner import run_benchmark_sync

    recorded: list[RunResult] = []

    def late(sig: signal.Signals) -> None:
        """Before the run a stop ends the worker (no record); once recorded it is absorbed."""
        if not recorded:
            raise KeyboardInterrupt

    def report(code: int, what: str) -> None:
        if parent is None or os.getppid() == parent:  # nobody reads the queue of a dead coordinator
            results.put((plan.index, code, what))

    try:
        result = run_benchmark_sync(
            config, progress=False, shard=plan, on_result=recorded.append, late_signals=late
        )
    except ConfigError as exc:
        report(2, str(exc))
        return
    except KeyboardInterrupt:
        report(1, "stopped before its run began")
        return
    report(result.exit_code, str(result.result_dir))


def coordinator_config(manifest: dict[str, Any], config: RunConfig, cores: CorePlan) -> None:
    """The merged manifest's config says what the user ran, not worker 0's private settings."""
    section = manifest.get("config")
    if not isinstance(section, dict):
        return
    for key in ("results_dir", "metrics_port", "metrics_listen_address", "linger_s", "max_concurrency"):
        section[key] = getattr(config, key)
    count = read_manifest(manifest).shards.get("count")
    manifest["workers"] = {"count": count, "start": "spawn", "cores": cores.describe()}


def run_workers(
    config: RunConfig, workers: int, params: dict[str, Any], *, progress: bool = True, on_result: Any = None
) -> RunResult:
    """Run the config over `workers` processes and write the merged record (see module docstring)."""
    check_results_dir(config.results_dir)
    concurrency_shares(config.max_concurrency, workers)  # a bad split fails before anything is made
    lead = start_lead_s(workers, config.total_requests or 0)
    start_at = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=lead + 1)
    if params.get("start_at"):
        start_at = parse_start_at(params["start_at"])
    run_id = params.get("run_id") or new_run_id()
    tmp = Path(tempfile.mkdtemp(prefix=f".workers-{run_id}-", dir=config.results_dir))
    note_coordinator(tmp)  # a later loadgen rebuilds the run from here if this process dies
    cores = plan_cores(usable_cores(), workers)
    coordinator = Coordinator(config, run_id, progress, cores)
    try:
        with embedded_engine(config) as base_url:
            serve = bool(config.metrics_port) or progress
            configs = worker_configs(config, base_url, workers, tmp, serve)
            plans = [ShardPlan(i, workers, start_at, run_id) for i in range(workers)]
            outcomes = coordinator.run(worker_main, configs, plans)
        result = _record(config, run_id, outcomes, cores, tmp)
    except BaseException:
        if not any(tmp.glob("shard-*/*/manifest.json")):
            shutil.rmtree(tmp, ignore_errors=True)  # nothing measured: nothing half-written left
        raise
    if on_result is not None:
        on_result(result)
    if not result.not_written and not result.partial:
        shutil.rmtree(tmp, ignore_errors=True)  # the shard records live on in the merged one
    coordinator.finish(config.linger_s if config.metrics_port else 0.0)
    return result


def record_dirs(
    outcomes: list[tuple[int, int, str]], run_id: str, tmp: Path
) -> tuple[list[Path], dict[int, str]]:
    """The workers' run folders to merge, and why each worker that died unreported is not whole:
    a killed worker's folder is still there (its start manifest and the requests it journaled),
    read back as a crashed shard."""
    dirs: list[Path] = []
    causes: dict[int, str] = {}
    for index, code, where in outcomes:
        if code == 2:
            continue
        if Path(where).is_dir():
            dirs.append(Path(where))
            continue
        journaled = tmp / f"shard-{index}" / run_id
        if (journaled / "manifest.json").is_file():
            dirs.append(journaled)
            causes[index] = f"{where.split(' before ')[0]}: its journaled requests merged"
    return dirs, causes


def _record(
    config: RunConfig, run_id: str, outcomes: list[tuple[int, int, str]], cores: CorePlan, tmp: Path
) -> RunResult:
    """Merge the workers' records into the run's (ConfigError when no worker wrote one)."""
    dirs, causes = record_dirs(outcomes, run_id, tmp)
    if not dirs:
        errors = dict.fromkeys(where for _, code, where in outcomes if code == 2)
        raise ConfigError("; ".join(errors) or "no worker wrote a record")
    merged = merge([read_shard(d) for d in dirs], causes)
    coordinator_config(merged.manifest, config, cores)
    written = write_merged(config.results_dir, merged, dirs)
    partial = bool(merged.summary["partial"])
    worst = max((code for _, code, _ in outcomes), default=0)
    code = 3 if written.not_written else 1 if partial or worst else 0
    return RunResult(
        run_id, written.run_dir, merged.summary, merged.manifest, partial, code, written.not_written
    )
