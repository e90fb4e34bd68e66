"""`loadgen store import|migrate|info`: the results database (SQLite by default, PostgreSQL for a team)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from loadgen.store.db import StoreError, open_store
from loadgen.store.schema import LATEST
from loadgen.store.url import StoreURL, StoreURLError, parse_store

STORE_ENV = "LOADGEN_STORE"  # read here, at the CLI: the store is no RunConfig field
STORE_HELP = (
    "Results database: sqlite:///PATH (default: <results-dir>/infergauge.db), "
    "postgresql://USER@HOST/DB (password from PGPASSWORD or ~/.pgpass), or none; "
    f"default from {STORE_ENV}."
)


def store_option(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The `--store URL` option (else $LOADGEN_STORE) every command that writes or reads the store takes."""
    return click.option("--store", "store", metavar="URL", envvar=STORE_ENV, help=STORE_HELP)(fn)


def resolve_store(value: str | None, results_dir: str) -> StoreURL | None:
    """The --store value parsed; a bad one is a one-line usage error naming it."""
    try:
        return parse_store(value, results_dir)
    except StoreURLError as exc:
        raise click.UsageError(str(exc)) from None


def _required(value: str | None, results_dir: str) -> StoreURL:
    url = resolve_store(value, results_dir)
    if url is None:
        raise click.UsageError("--store none: this command needs a store")
    return url


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def store() -> None:
    """The results store: import run folders, migrate its schema, show what it holds."""


@store.command("import")
@click.argument("results_dir", type=click.Path(file_okay=False, exists=True))
@store_option
def import_(results_dir: str, store: str | None) -> None:
    """Load every run folder of RESULTS_DIR into the store; a second import adds nothing."""
    from loadgen.scale.orphans import recover_and_say
    from loadgen.store.importer import import_runs

    url = _required(store, results_dir)
    recover_and_say(results_dir)  # a --workers run whose coordinator died is rebuilt first
    try:
        with open_store(url) as db:
            report = import_runs(db, results_dir)
    except StoreError as exc:
        click.echo(f"Error: results store {url.public}: {exc}", err=True)
        sys.exit(1)
    for run_id, why in sorted(report.unreadable.items()):
        click.echo(f"unreadable: {run_id}: {why}", err=True)
    click.echo(f"imported {results_dir} into {url.public}: {report.line()}")


@store.command("migrate")
@click.option("--results-dir", default="results", show_default=True, help="Where the default store is.")
@store_option
def migrate(results_dir: str, store: str | None) -> None:
    """Bring the store's schema to this loadgen's version (every write does this too)."""
    url = _required(store, results_dir)
    try:
        with open_store(url, migrate=False) as db:
            before, after = db.migrate()
    except StoreError as exc:
        click.echo(f"Error: results store {url.public}: {exc}", err=True)
        sys.exit(1)
    click.echo(f"{url.public}: schema version {before} -> {after}")


@store.command("info")
@click.option("--results-dir", default="results", show_default=True, help="Where the default store is.")
@store_option
def info(results_dir: str, store: str | None) -> None:
    """Print the store's schema version and how many runs it holds (changes nothing)."""
    url = _required(store, results_dir)
    if url.dialect == "sqlite" and not Path(url.target).is_file():
        click.echo(
            f"Error: results store {url.public}: no such file (a run or `store migrate` creates it)", err=True
        )
        sys.exit(1)
    try:
        with open_store(url, migrate=False) as db:
            facts = db.info()
    except StoreError as exc:
        click.echo(f"Error: results store {url.public}: {exc}", err=True)
        sys.exit(1)
    shards = f" (and {facts.shard_rows} shard rows, not counted)" if facts.shard_rows else ""
    click.echo(
        f"{facts.store}: schema version {facts.schema_version}{_compared(facts.schema_version)}, "
        f"{facts.runs} runs{shards}"
    )


def _compared(version: int) -> str:
    """What this loadgen does with a schema of that version."""
    if version > LATEST:
        return f" (newer than this loadgen's {LATEST}: it will not write to it)"
    if version < LATEST:
        return f" (migrated to {LATEST} on the next write or `loadgen store migrate`)"
    return ""


if __name__ == "__main__":  # pragma: no cover
    sys.exit(store())
