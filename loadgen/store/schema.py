"""The one schema of the store, for SQLite and PostgreSQL: columns, numbered migrations, and the few
dialect differences written as data. All of the store's SQL is in this module."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

# column kinds -> the SQL type of each dialect
TEXT, REAL, INT, BOOL, TS, JSON = "text", "real", "int", "bool", "timestamp", "json"


@dataclass(frozen=True)
class Dialect:
    """What differs between the two databases."""

    name: str
    types: dict[str, str]
    begin: str  # opens a write transaction
    lock: str | None  # serialises migrations of concurrent writers (SQLite's BEGIN IMMEDIATE does)
    placeholder: Callable[[str], str]  # a named parameter
    distinct: str  # "the values differ, NULLs included"
    has_table: str  # one row when the table (parameter `name`) exists
    json_text: Callable[[str, str], str]  # (column, "a.b") -> the text at that path of a JSON column


SQLITE = Dialect(
    "sqlite",
    {TEXT: "TEXT", REAL: "REAL", INT: "INTEGER", BOOL: "INTEGER", TS: "TEXT", JSON: "TEXT"},
    "BEGIN IMMEDIATE",
    None,
    lambda name: f":{name}",
    "IS NOT",
    "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = :name",
    lambda column, path: f"json_extract({column}, '$.{path}')",
)
POSTGRESQL = Dialect(
    "postgresql",
    {
        TEXT: "TEXT",
        REAL: "DOUBLE PRECISION",
        INT: "BIGINT",
        BOOL: "BOOLEAN",
        TS: "TIMESTAMPTZ",
        JSON: "JSONB",
    },
    "BEGIN",
    "SELECT pg_advisory_xact_lock(7200412)",  # any fixed key: only infergauge's migrations take it
    lambda name: f"%({name})s",
    "IS DISTINCT FROM",
    "SELECT 1 FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = %(name)s",
    lambda column, path: f"({column} #>> '{{{','.join(path.split('.'))}}}')",
)
DIALECTS = {d.name: d for d in (SQLITE, POSTGRESQL)}

# The runs table as version 1 created it (never edit: add a migration instead).
RUNS_V1: tuple[tuple[str, str], ...] = (
    ("run_id", TEXT),
    ("started_at", TS),
    ("ended_at", TS),
    ("suite", TEXT),
    ("series_key", TEXT),
    ("status", TEXT),
    ("partial", BOOL),
    ("partial_reason", TEXT),
    ("crashed", BOOL),
    ("experiment_id", TEXT),
    ("scenario", TEXT),
    ("target", TEXT),
    ("base_url", TEXT),
    ("engine", TEXT),
    ("engine_version", TEXT),
    ("model", TEXT),
    ("gpu_model", TEXT),
    ("gpu_count", INT),
    ("workload", TEXT),
    ("workload_fingerprint", TEXT),
    ("asked_rate", REAL),
    ("max_concurrency", INT),
    ("duration_s", REAL),
    ("requests_ok", INT),
    ("requests_failed", INT),
    ("error_rate", REAL),
    ("request_throughput", REAL),
    ("output_throughput", REAL),
    ("total_token_throughput", REAL),
    ("goodput", REAL),
    ("ttft_p50_s", REAL),
    ("ttft_p99_s", REAL),
    ("tpot_p50_s", REAL),
    ("tpot_p99_s", REAL),
    ("itl_p50_s", REAL),
    ("itl_p99_s", REAL),
    ("e2e_p50_s", REAL),
    ("e2e_p99_s", REAL),
    ("tool_version", TEXT),
    ("manifest", JSON),
    ("summary", JSON),
)
# Version 2: a hash of the run's manifest + summary (import tells unchanged from updated rows).
RUNS_V2: tuple[tuple[str, str], ...] = (("row_hash", TEXT),)
# Version 4: `shard` is "i/N" on the row of one shard of a sharded run (`loadgen run --shard`), NULL
# on a whole run (one process, or `loadgen merge`'s merged run). A shard row is keyed
# `<run_id>/shard-<i>` (its shards and the merged run share one run id): baselines and dashboards read
# only `shard IS NULL` rows, so a shard's slice never counts as a run.
RUNS_V4: tuple[tuple[str, str], ...] = (("shard", TEXT),)
RUNS_COLUMNS = RUNS_V1 + RUNS_V2 + RUNS_V4
# Version 5: `noisy` is why the run's own record says it was unreliable ("; "-joined reasons of
# loadgen.baseline.noisy) as the last baseline check of its series found it, NULL when it is not (or
# was never checked). The check writes it, not the run writer: it is not in RUNS_COLUMNS, so a re-import
# keeps it, and the next check brings it up to date.
RUNS_V5: tuple[tuple[str, str], ...] = (("noisy", TEXT),)
WHOLE_RUNS = "shard IS NULL"  # the condition every reader of whole runs adds
COLUMN_KINDS = dict(RUNS_COLUMNS)

# Version 3: the change points `loadgen baseline check` found, one row per (suite, series, metric, first
# run after); a change no longer found is closed (open false, closed_at set), never deleted.
CHANGES_V3: tuple[tuple[str, str], ...] = (
    ("suite", TEXT),
    ("series_key", TEXT),
    ("metric", TEXT),
    ("metric_label", TEXT),
    ("unit", TEXT),
    ("kind", TEXT),  # regression | improvement
    ("status", TEXT),  # suspected | confirmed
    ("relative_size", REAL),  # after / before - 1 (medians)
    ("before_median", REAL),
    ("after_median", REAL),
    ("p_value", REAL),
    ("last_run_before", TEXT),
    ("last_before_at", TS),
    ("first_run_after", TEXT),
    ("first_after_at", TS),
    ("cause", TEXT),  # the top-ranked manifest difference, "key: a -> b"
    ("causes", JSON),  # every ranked difference kept by the check
    ("detected_at", TS),  # when a check first found it
    ("open", BOOL),  # the latest change of its series and metric, found by the last check
    ("closed_at", TS),  # when it stopped being open (superseded or no longer found)
    ("annotation_id", INT),  # the Grafana annotation pushed for it (NULL: none yet)
)
CHANGE_KEY = ("suite", "series_key", "metric", "first_run_after")
CHANGE_KINDS = dict(CHANGES_V3)


def _v1(d: Dialect) -> list[str]:
    cols = ",\n  ".join(f"{name} {d.types[kind]}" for name, kind in RUNS_V1)
    return [f"CREATE TABLE runs (\n  {cols},\n  PRIMARY KEY (run_id)\n)"]


def _v2(d: Dialect) -> list[str]:
    return [
        *(f"ALTER TABLE runs ADD COLUMN {name} {d.types[kind]}" for name, kind in RUNS_V2),
        "CREATE INDEX runs_series_started ON runs (series_key, started_at)",
    ]


def _v3(d: Dialect) -> list[str]:
    cols = ",\n  ".join(f"{name} {d.types[kind]}" for name, kind in CHANGES_V3)
    return [
        f"CREATE TABLE changes (\n  {cols},\n  PRIMARY KEY ({', '.join(CHANGE_KEY)})\n)",
        "CREATE INDEX changes_series_first_after ON changes (suite, series_key, first_after_at)",
    ]


def _v4(d: Dialect) -> list[str]:
    # rows written before version 4 by a shard (keyed by the shared run id) are marked as shards
    index, count = d.json_text("manifest", "shard.index"), d.json_text("manifest", "shard.count")
    return [
        *(f"ALTER TABLE runs ADD COLUMN {name} {d.types[kind]}" for name, kind in RUNS_V4),
        f"UPDATE runs SET shard = {index} || '/' || {count} WHERE {index} IS NOT NULL",
    ]


def _v5(d: Dialect) -> list[str]:
    return [f"ALTER TABLE runs ADD COLUMN {name} {d.types[kind]}" for name, kind in RUNS_V5]


# Migration N brings a database from version N-1 to N; one transaction each.
MIGRATIONS: tuple[Callable[[Dialect], list[str]], ...] = (_v1, _v2, _v3, _v4, _v5)
LATEST = len(MIGRATIONS)

CREATE_VERSION_TABLE = "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)"
READ_VERSION = "SELECT MAX(version) FROM schema_version"
COUNT_RUNS = "SELECT COUNT(*) FROM runs"


def set_version(d: Dialect, version: int) -> list[tuple[str, dict[str, int]]]:
    """Statements (with parameters) that record the schema version."""
    insert = f"INSERT INTO schema_version (version) VALUES ({d.placeholder('version')})"
    return [("DELETE FROM schema_version", {}), (insert, {"version": version})]


def select_hash(d: Dialect) -> str:
    """The stored hash of one run (parameter `run_id`)."""
    return f"SELECT row_hash FROM runs WHERE run_id = {d.placeholder('run_id')}"


def upsert(d: Dialect, columns: Sequence[str]) -> str:
    """Insert a run, or replace its row when its content hash differs (a re-import changes nothing)."""
    names = ", ".join(columns)
    values = ", ".join(d.placeholder(c) for c in columns)
    updates = ", ".join(f"{c} = excluded.{c}" for c in columns if c != "run_id")
    return (
        f"INSERT INTO runs ({names}) VALUES ({values}) "
        f"ON CONFLICT (run_id) DO UPDATE SET {updates} "
        f"WHERE runs.row_hash {d.distinct} excluded.row_hash"
    )


# kept from the first time a check recorded a change (not overwritten by later checks)
_CHANGE_KEPT = ("detected_at", "annotation_id")


def upsert_change(d: Dialect) -> str:
    """Insert a change, or bring its row up to date (status, figures, open); `detected_at` and
    `annotation_id` are kept, `closed_at` is set once when it stops being open."""
    names = [name for name, _ in CHANGES_V3]
    values = ", ".join(d.placeholder(c) for c in names)
    updates = [
        f"{c} = excluded.{c}"
        for c in names
        if c not in CHANGE_KEY and c not in _CHANGE_KEPT and c != "closed_at"
    ]
    updates.append(
        "closed_at = CASE WHEN excluded.open THEN NULL "
        "ELSE COALESCE(changes.closed_at, excluded.closed_at) END"
    )
    return (
        f"INSERT INTO changes ({', '.join(names)}) VALUES ({values}) "
        f"ON CONFLICT ({', '.join(CHANGE_KEY)}) DO UPDATE SET {', '.join(updates)}"
    )


def open_changes(d: Dialect) -> str:
    """The keys of the open changes of one series (parameters `suite`, `series_key`, `open`)."""
    p = d.placeholder
    return (
        f"SELECT {', '.join(CHANGE_KEY)} FROM changes "
        f"WHERE suite = {p('suite')} AND series_key = {p('series_key')} AND open = {p('open')}"
    )


def _one_change(d: Dialect) -> str:
    """The WHERE condition naming one change by its key (parameters: the key's columns)."""
    return " AND ".join(f"{c} = {d.placeholder(c)}" for c in CHANGE_KEY)


def close_change(d: Dialect) -> str:
    """Close one change (parameters: the key, `open` false and `closed_at`)."""
    p = d.placeholder
    return f"UPDATE changes SET open = {p('open')}, closed_at = {p('closed_at')} WHERE {_one_change(d)}"


def unannotated_changes(d: Dialect) -> str:
    """Open confirmed changes no Grafana annotation was pushed for yet (parameter `open` true)."""
    names = ", ".join(name for name, _ in CHANGES_V3)
    return (
        f"SELECT {names} FROM changes WHERE annotation_id IS NULL AND status = 'confirmed' "
        f"AND open = {d.placeholder('open')} ORDER BY first_after_at, series_key, metric"
    )


def set_annotation(d: Dialect) -> str:
    """Record the annotation pushed for one change (parameters: the key and `annotation_id`)."""
    return f"UPDATE changes SET annotation_id = {d.placeholder('annotation_id')} WHERE {_one_change(d)}"


def mark_noisy(d: Dialect) -> str:
    """Set one run's noisy mark (parameters `run_id`, `noisy`: the reasons, or NULL)."""
    return f"UPDATE runs SET noisy = {d.placeholder('noisy')} WHERE run_id = {d.placeholder('run_id')}"


def select_noisy(d: Dialect) -> str:
    """(run_id, noisy) of the marked runs of one series (parameter `series_key`), oldest first."""
    return (
        f"SELECT run_id, noisy FROM runs WHERE series_key = {d.placeholder('series_key')} "
        f"AND noisy IS NOT NULL AND {WHOLE_RUNS} ORDER BY started_at"
    )


def select_changes(d: Dialect) -> str:
    """Every stored change, oldest first."""
    names = ", ".join(name for name, _ in CHANGES_V3)
    return f"SELECT {names} FROM changes ORDER BY first_after_at, suite, series_key, metric"
