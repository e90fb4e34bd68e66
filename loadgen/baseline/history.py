"""Read a suite's stored history: the `runs` rows of its series, oldest first (the only I/O of the check)."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from loadgen.baseline.metrics import WATCHED
from loadgen.results.manifest_schema import Manifest, read_manifest
from loadgen.store.db import Store
from loadgen.store.schema import WHOLE_RUNS


@dataclass(frozen=True)
class StoredRun:
    """One run of a series as the store holds it: id, start time, status, watched figures, record."""

    run_id: str
    started_at: str
    status: str
    figures: dict[str, float | None]
    manifest: dict[str, Any]
    summary: dict[str, Any]

    @property
    def typed(self) -> Manifest:
        """The stored manifest through the one schema (an older record upgraded)."""
        return read_manifest(self.manifest)


def _query(store: Store, suite: str | None) -> tuple[str, dict[str, Any]]:
    columns = ", ".join(sorted({w.column for w in WATCHED.values()}))
    where = (
        "WHERE suite IS NOT NULL" if suite is None else f"WHERE suite = {store.dialect.placeholder('suite')}"
    )
    where += f" AND {WHOLE_RUNS}"  # a shard's row is a slice of a run, never a run of the series
    sql = (
        f"SELECT run_id, started_at, status, suite, series_key, manifest, summary, {columns} "
        f"FROM runs {where} ORDER BY started_at, run_id"
    )
    return sql, ({} if suite is None else {"suite": suite})


def _json(value: Any) -> dict[str, Any]:
    """A JSON column: SQLite gives text, PostgreSQL's JSONB a dict already."""
    if isinstance(value, str):
        value = json.loads(value)
    return value if isinstance(value, dict) else {}


def read_history(store: Store, suite: str | None = None) -> dict[tuple[str, str], list[StoredRun]]:
    """(suite, series key) -> its runs ordered by start time; every suite when `suite` is None. Each
    stored manifest is read through the one schema (ManifestError naming the run when it cannot be,
    e.g. a newer loadgen wrote it)."""
    sql, params = _query(store, suite)
    cursor = store.conn.execute(sql, params)
    names = [d[0] for d in cursor.description]
    out: dict[tuple[str, str], list[StoredRun]] = defaultdict(list)
    by_column = {w.column: w.name for w in WATCHED.values()}
    for values in cursor.fetchall():
        row = dict(zip(names, values, strict=True))
        figures = {name: _float(row[column]) for column, name in by_column.items()}
        started = row["started_at"]
        run = StoredRun(
            str(row["run_id"]),
            started.isoformat() if hasattr(started, "isoformat") else str(started),
            str(row["status"]),
            figures,
            dict(read_manifest(_json(row["manifest"]), f"results store run {row['run_id']}").raw),
            _json(row["summary"]),
        )
        out[(str(row["suite"]), str(row["series_key"]))].append(run)
    return dict(out)


def _float(value: Any) -> float | None:
    return None if value is None else float(value)
