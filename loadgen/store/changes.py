"""The `changes` table: record the change points a check found (idempotent), close the ones it no longer
finds, and keep track of the Grafana annotation pushed for each. The SQL is in schema.py."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from loadgen.store import schema
from loadgen.store.db import Store

Row = dict[str, Any]
Key = tuple[Any, ...]


def change_key(row: Mapping[str, Any]) -> Key:
    """(suite, series_key, metric, first_run_after): what makes one change one row."""
    return tuple(row[c] for c in schema.CHANGE_KEY)


def _adapt(store: Store, kind: str, value: Any) -> Any:
    adapt = store.driver.adapt.get(kind)
    return value if adapt is None else adapt(value)


def _values(store: Store, row: Mapping[str, Any]) -> Row:
    return {name: _adapt(store, kind, row.get(name)) for name, kind in schema.CHANGES_V3}


def write_changes(
    store: Store, found: Iterable[Mapping[str, Any]], checked: Iterable[tuple[str, str]], now: datetime
) -> int:
    """Upsert every change `found` (rows of schema.CHANGES_V3 without the bookkeeping columns) and
    close the open changes of the `checked` (suite, series key) pairs it no longer holds, in one
    transaction; returns how many were closed that way."""
    rows = [{**r, "detected_at": now, "closed_at": None if r["open"] else now} for r in found]
    keys = {change_key(r) for r in rows}
    closed = 0
    with store.transaction():
        for row in rows:
            store.conn.execute(schema.upsert_change(store.dialect), _values(store, row))
        for suite, series_key in checked:
            params = {"suite": suite, "series_key": series_key, "open": _adapt(store, schema.BOOL, True)}
            found_open = store.conn.execute(schema.open_changes(store.dialect), params).fetchall()
            stale = [tuple(k) for k in found_open if tuple(k) not in keys]
            for key in stale:
                close = dict(zip(schema.CHANGE_KEY, key, strict=True))
                close["open"] = _adapt(store, schema.BOOL, False)
                close["closed_at"] = _adapt(store, schema.TS, now)
                store.conn.execute(schema.close_change(store.dialect), close)
            closed += len(stale)
    return closed


def _plain(names: list[str], values: Iterable[Any]) -> Row:
    """A row as Python values whatever the dialect (SQLite gives JSON as text and bools as 0/1)."""
    out = dict(zip(names, values, strict=True))
    if isinstance(out.get("causes"), str):
        out["causes"] = json.loads(out["causes"])
    out["open"] = bool(out["open"])
    return out


def _rows(store: Store, sql: str, params: dict[str, Any] | None = None) -> list[Row]:
    cursor = store.conn.execute(sql, params or {})
    names = [d[0] for d in cursor.description]
    return [_plain(names, values) for values in cursor.fetchall()]


def read_changes(store: Store) -> list[Row]:
    """Every stored change, oldest first."""
    return _rows(store, schema.select_changes(store.dialect))


def unannotated(store: Store) -> list[Row]:
    """Open confirmed changes that have no Grafana annotation yet."""
    return _rows(store, schema.unannotated_changes(store.dialect), {"open": _adapt(store, schema.BOOL, True)})


def set_annotation(store: Store, row: Mapping[str, Any], annotation_id: int) -> None:
    """Remember the annotation pushed for one change (it is not pushed again)."""
    params = {**{c: row[c] for c in schema.CHANGE_KEY}, "annotation_id": annotation_id}
    store.conn.execute(schema.set_annotation(store.dialect), params)
