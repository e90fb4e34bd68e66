"""An open results store: migrate its schema, upsert run rows, count them."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

from loadgen.store import schema
from loadgen.store.drivers import DRIVERS
from loadgen.store.url import StoreURL

Outcome = Literal["new", "updated", "skipped"]


class StoreError(RuntimeError):
    """The store could not be opened, migrated or written; the message names it (no password)."""


@dataclass(frozen=True)
class StoreInfo:
    """What `loadgen store info` prints."""

    store: str
    schema_version: int
    runs: int  # whole runs (a merged run counts once)
    shard_rows: int = 0  # rows of the shards of `--shard i/N` runs (schema 4 on), not counted in runs


class Store:
    """One connection to a store whose schema is at schema.LATEST (see `open_store`)."""

    def __init__(self, url: StoreURL, conn: Any) -> None:
        self.url, self.conn = url, conn
        self.dialect = schema.DIALECTS[url.dialect]
        self.driver = DRIVERS[url.dialect]

    def _one(self, sql: str, params: dict[str, Any] | None = None) -> Any:
        row = self.conn.execute(sql, params or {}).fetchone()
        return None if row is None else row[0]

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """BEGIN ... COMMIT, ROLLBACK on any error (both connections are in autocommit mode)."""
        self.conn.execute(self.dialect.begin)
        try:
            yield
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    def version(self) -> int:
        """The schema version of the database (0: empty)."""
        if self._one(self.dialect.has_table, {"name": "schema_version"}) is None:
            return 0
        return int(self._one(schema.READ_VERSION) or 0)

    def migrate(self) -> tuple[int, int]:
        """Apply the missing migrations, one transaction each; returns (version before, after)."""
        before = self.version()
        self._refuse_newer(before)
        for step in range(before + 1, schema.LATEST + 1):
            with self.transaction():
                if self.dialect.lock:
                    self.conn.execute(self.dialect.lock)
                self.conn.execute(schema.CREATE_VERSION_TABLE)
                if int(self._one(schema.READ_VERSION) or 0) >= step:  # another writer got here first
                    continue
                for statement in schema.MIGRATIONS[step - 1](self.dialect):
                    self.conn.execute(statement)
                for statement, params in schema.set_version(self.dialect, step):
                    self.conn.execute(statement, params)
        return before, schema.LATEST

    def _refuse_newer(self, version: int) -> None:
        if version > schema.LATEST:
            raise StoreError(
                f"store {self.url.public} has schema version {version}, newer than this loadgen's "
                f"{schema.LATEST}: upgrade infergauge to write to it"
            )

    def put(self, row: dict[str, Any]) -> Outcome:
        """Upsert one run row in one transaction: new, updated (its record changed) or skipped (same)."""
        columns = [name for name, _ in schema.RUNS_COLUMNS]
        values = {c: self._adapt(c, row.get(c)) for c in columns}
        with self.transaction():
            stored = self.conn.execute(schema.select_hash(self.dialect), {"run_id": row["run_id"]}).fetchone()
            if stored is not None and stored[0] == row["row_hash"]:
                return "skipped"
            self.conn.execute(schema.upsert(self.dialect, columns), values)
        return "new" if stored is None else "updated"

    def _adapt(self, column: str, value: Any) -> Any:
        adapt = self.driver.adapt.get(schema.COLUMN_KINDS[column])
        return value if adapt is None else adapt(value)

    def info(self) -> StoreInfo:
        """Schema version and number of runs (read only: an older schema is not migrated)."""
        version = self.version()
        if not version:
            return StoreInfo(self.url.public, version, 0)
        if version < 4:  # before shard rows were marked
            return StoreInfo(self.url.public, version, int(self._one(schema.COUNT_RUNS) or 0))
        whole = int(self._one(f"{schema.COUNT_RUNS} WHERE {schema.WHOLE_RUNS}") or 0)
        shards = int(self._one(f"{schema.COUNT_RUNS} WHERE NOT ({schema.WHOLE_RUNS})") or 0)
        return StoreInfo(self.url.public, version, whole, shards)


@contextlib.contextmanager
def open_store(url: StoreURL, *, migrate: bool = True) -> Iterator[Store]:
    """Connect (and by default migrate); driver errors become StoreError naming the public URL."""
    driver = DRIVERS[url.dialect]
    try:
        errors: tuple[type[Exception], ...] = (*driver.errors(), OSError)
    except ImportError as exc:  # psycopg missing from this environment
        raise StoreError(f"{exc.name or exc} is not installed: pip install 'psycopg[binary]'") from None
    try:
        conn = driver.connect(url)
    except errors as exc:
        raise StoreError(_reason(url, exc)) from None
    try:
        store = Store(url, conn)
        if migrate:
            store.migrate()
        yield store
    except errors as exc:
        raise StoreError(_reason(url, exc)) from None
    finally:
        with contextlib.suppress(Exception):
            conn.close()


def _reason(url: StoreURL, exc: BaseException) -> str:
    """One line: the driver's first line of message, the password removed."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return url.scrub(lines[0] if lines else type(exc).__name__)
