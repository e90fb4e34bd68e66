"""`loadgen run`'s scale-out flags (`--shard`, `--shard-from-env`, `--shards`, `--start-at`, `--run-id`,
`--workers`) and their one resolution into a ShardPlan / worker count."""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from typing import Any

import click

from loadgen.config import ConfigError
from loadgen.workload.shard import ShardPlan, parse_shard, parse_start_at, shard_from_env

SCALE_KEYS = ("shard", "shard_from_env", "shards", "start_at", "run_id", "workers")
_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def scale_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Add the scale-out flags to a click command."""
    for option in reversed(
        (
            click.option(
                "--shard", help="Send slice i/N of the schedule (0-based; request k goes to k mod N)."
            ),
            click.option(
                "--shard-from-env", is_flag=True, default=None, help="Shard index from JOB_COMPLETION_INDEX."
            ),
            click.option("--shards", type=int, help="Shard count N for --shard-from-env."),
            click.option(
                "--start-at", help="Common start of the shards, ISO-8601 UTC (2026-12-01T02:00:00Z)."
            ),
            click.option(
                "--run-id", help="Run id the shards share (default: from --start-at, seed, workload)."
            ),
            click.option("--workers", help="N worker processes on this host, or auto (one per core)."),
        )
    ):
        command = option(command)
    return command


def shard_plan(params: Mapping[str, Any], environ: Mapping[str, str]) -> ShardPlan | None:
    """The ShardPlan the flags describe (None for an unsharded run); ConfigError on bad values."""
    run_id = params.get("run_id")
    if run_id is not None and not _RUN_ID.match(run_id):
        raise ConfigError(f"invalid --run-id {run_id!r}: letters, digits, '.', '_' and '-' only")
    start_at = parse_start_at(params["start_at"]) if params.get("start_at") else None
    if params.get("shard") and params.get("shard_from_env"):
        raise ConfigError("give --shard i/N or --shard-from-env, not both")
    if params.get("shard"):
        index, count = parse_shard(params["shard"])
    elif params.get("shard_from_env"):
        index, count = shard_from_env(environ, params.get("shards"))
    else:
        if (run_id is not None or start_at is not None) and params.get("workers") is None:
            raise ConfigError("--run-id and --start-at go with --shard, --shard-from-env or --workers")
        return None
    return ShardPlan(index, count, start_at, run_id)


def worker_count(value: str | None) -> int | None:
    """`--workers N|auto` -> N (auto: the CPUs this process may use), None when not given."""
    if value is None:
        return None
    if value == "auto":
        usable = getattr(os, "sched_getaffinity", None)  # Linux; elsewhere every CPU
        return max(len(usable(0)) if usable else os.cpu_count() or 1, 1)
    if not value.isdigit() or int(value) < 1:
        raise ConfigError(f"invalid --workers {value!r}: a count >= 1 or auto")
    return int(value)
