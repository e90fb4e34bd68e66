"""The two drivers: connect, and turn a row's Python values into what each database takes."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from loadgen.store.schema import BOOL, JSON, TS
from loadgen.store.url import StoreURL

CONNECT_TIMEOUT_S = 5  # a store that is down must not hold a finished run for long
RETRY_S = 0.01  # between tries of a store another process holds locked


@dataclass(frozen=True)
class Driver:
    """How to open one dialect's connection (autocommit: the store opens its own transactions)."""

    connect: Callable[[StoreURL], Any]
    errors: Callable[[], tuple[type[Exception], ...]]
    adapt: dict[str, Callable[[Any], Any]]  # column kind -> value as the driver takes it


def _connect_sqlite(url: StoreURL) -> sqlite3.Connection:
    path = Path(url.target)
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, timeout=CONNECT_TIMEOUT_S, isolation_level=None)
    try:
        _wal(conn)  # readers (Grafana) never block a run's write
    except sqlite3.Error:
        conn.close()
        raise
    return conn


def _wal(conn: sqlite3.Connection) -> None:
    """Switch to WAL, retried while another process holds the lock: a new store's first writers (the
    shards of one run, finishing together) each switch it, and SQLite answers a switch that meets
    another's lock with "database is locked" at once, without the busy timeout."""
    deadline = time.monotonic() + CONNECT_TIMEOUT_S
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            busy = getattr(exc, "sqlite_errorcode", None) in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
            if not (busy or "locked" in str(exc)) or time.monotonic() >= deadline:
                raise
            time.sleep(RETRY_S)


def _connect_postgresql(url: StoreURL) -> Any:
    import psycopg  # imported only when a PostgreSQL store is used

    return psycopg.connect(url.target, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)


def _pg_errors() -> tuple[type[Exception], ...]:
    import psycopg

    return (psycopg.Error,)


def _pg_json(value: Any) -> Any:
    from psycopg.types.json import Jsonb

    return None if value is None else Jsonb(value)


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat(timespec="milliseconds")


DRIVERS: dict[str, Driver] = {
    "sqlite": Driver(
        _connect_sqlite,
        lambda: (sqlite3.Error,),
        {
            BOOL: lambda v: None if v is None else int(bool(v)),
            TS: _iso,
            JSON: lambda v: None if v is None else json.dumps(v, sort_keys=True, default=str),
        },
    ),
    "postgresql": Driver(_connect_postgresql, _pg_errors, {JSON: _pg_json}),
}
