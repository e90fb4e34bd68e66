"""A finished run's row, written after its folder: a store that fails costs one warning, never the run."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from loadgen.results.rundir import load_run
from loadgen.store.db import Outcome, open_store
from loadgen.store.rows import build_row
from loadgen.store.url import StoreURL, parse_store

if TYPE_CHECKING:
    from loadgen.config import RunConfig
    from loadgen.records import RunResult

Warn = Callable[[str], None]


def store_run(url: StoreURL | None, results_dir: str | Path, run_id: str, warn: Warn) -> Outcome | None:
    """Upsert the row of the run folder `results_dir/run_id` (None: store off, or it failed and `warn`
    was called with one line naming the store, the reason and how to add the run later)."""
    if url is None:
        return None
    try:
        record = load_run(results_dir, run_id)  # the row is built from the folder, as `store import` does
        with open_store(url) as store:
            return store.put(build_row(record.manifest, record.summary))
    except Exception as exc:  # noqa: BLE001 - the run folder is written: a store problem must not fail it
        warn(outage_warning(url, run_id, results_dir, exc))
        return None


def outage_warning(url: StoreURL, run_id: str, results_dir: str | Path, exc: BaseException) -> str:
    """One line: the store (no password), the run, the reason, and the `loadgen store import` to run."""
    reason = url.scrub(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
    return (
        f"warning: results store {url.public} did not take run {run_id} ({reason}); "
        f"its folder is kept: add it later with `loadgen store import {results_dir} --store {url.public}`"
    )


def storing(
    run_fn: Callable[[RunConfig], RunResult], store: str | None, warn: Warn
) -> Callable[[RunConfig], RunResult]:
    """`run_fn` that also writes each run's row once its folder is written (sweep, capacity, plans);
    `store` is the --store value (None: the default file under each run's results dir). A bad value
    raises StoreURLError now, before any run."""
    if parse_store(store, ".") is None:
        return run_fn

    def run_and_store(config: RunConfig) -> RunResult:
        result = run_fn(config)
        store_run(parse_store(store, config.results_dir), config.results_dir, result.run_id, warn)
        return result

    return run_and_store
