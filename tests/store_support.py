"""Helpers of the results-store tests: the stores under test, the loadgen CLI in-process, reading rows."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from loadgen.cli.main import cli
from loadgen.store.db import open_store
from loadgen.store.url import StoreURL, parse_store
from tests.pg_cluster import PgCluster


@dataclass
class Backend:
    """One store under test: the --store value, its printable form, and how to take it down."""

    name: str
    url: str
    public: str
    secret: str | None
    outage: Callable[[], contextlib.AbstractContextManager[None]]


@contextlib.contextmanager
def sqlite_outage(path: Path) -> Iterator[None]:
    """The database file replaced by a directory: SQLite refuses to open it."""
    aside = path.with_name(path.name + ".aside")
    path.rename(aside)
    path.mkdir()
    try:
        yield
    finally:
        path.rmdir()
        aside.rename(path)


@contextlib.contextmanager
def pg_outage(cluster: PgCluster) -> Iterator[None]:
    """The server stopped (fast), started again on leaving."""
    cluster.stop()
    try:
        yield
    finally:
        cluster.start()


def loadgen(*args: str) -> Result:
    """The loadgen CLI in this process (stdout and stderr kept apart)."""
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def sim_run(results: Path, store: str | None, *extra: str) -> Result:
    """A short run against the embedded simulated engine, no exporter, no lingering (store None:
    no --store option)."""
    exporter = "none"  # the run attaches no exporter (and says nothing about it)
    return loadgen(
        "run",
        "--target",
        "sim",
        "--num-prompts",
        "4",
        "--rate",
        "inf",
        "--linger",
        "0",
        "--metrics-port",
        "0",
        "--quiet",
        "--exporter-url",
        exporter,
        "--results-dir",
        str(results),
        *(() if store is None else ("--store", store)),
        *extra,
    )


def store_url(url: str) -> StoreURL:
    """The parsed --store value of a test store."""
    parsed = parse_store(url, ".")
    assert parsed is not None
    return parsed


COLUMNS = ("run_id", "status", "partial", "output_throughput", "ttft_p99_s", "e2e_p99_s", "row_hash")


def stored(url: str) -> dict[str, dict[str, Any]]:
    """Every row of the store's runs table (a few columns), by run_id."""
    with open_store(store_url(url), migrate=False) as store:
        found = store.conn.execute(f"SELECT {', '.join(COLUMNS)} FROM runs ORDER BY run_id").fetchall()
    return {row[0]: dict(zip(COLUMNS, row, strict=True)) for row in found}


def run_ids(results: Path) -> list[str]:
    """Run folders under a results dir."""
    return sorted(p.name for p in results.iterdir() if (p / "summary.json").is_file())
