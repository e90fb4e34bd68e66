"""Run every SQL query of a dashboard (panels, annotations, variables) the way Grafana's PostgreSQL
datasource would, and say whether each returned what its panel needs.

Variables are resolved in order (a later one's query may use an earlier one): a value given by the
caller wins, else every value the variable's query offers (what "All" sends). Each query is expanded
by grafana.dashgen.sqlmacros and run through `execute` (sql -> column names, rows), any DB-API
connection. What a query must return: a time series panel a `time` column and a numeric one, an
annotation `time` and `text`, a table or variable at least one row.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from .queries import walk_panels
from .sql import POSTGRES_TYPE
from .sqlmacros import Selection, TimeRange, expand

Execute = Callable[[str], tuple[list[str], list[Sequence[Any]]]]


@dataclass(frozen=True)
class SqlQuery:
    """One SQL query of a dashboard; `fmt` is time_series, table, annotation or variable."""

    dashboard: str
    kind: str  # "panel" | "annotation" | "variable"
    title: str
    ref: str
    sql: str
    fmt: str


@dataclass(frozen=True)
class SqlOutcome:
    """What one query returned: its columns, how many rows, and what Grafana would miss ('' none)."""

    query: SqlQuery
    expanded: str
    columns: tuple[str, ...]
    rows: int
    problem: str


def _is_sql(node: Mapping[str, Any]) -> bool:
    return bool((node.get("datasource") or {}).get("type") == POSTGRES_TYPE)


def iter_sql_queries(board: Mapping[str, Any]) -> Iterator[SqlQuery]:
    """All SQL queries of one dashboard, variables first (in order), then annotations, then panels."""
    uid = str(board["uid"])
    for var in board.get("templating", {}).get("list", []):
        if var.get("type") == "query" and _is_sql(var):
            yield SqlQuery(uid, "variable", var["name"], var["name"], str(var["query"]), "variable")
    for ann in board.get("annotations", {}).get("list", []):
        if _is_sql(ann):
            yield SqlQuery(uid, "annotation", ann["name"], "Anno", ann["target"]["rawSql"], "annotation")
    for panel in walk_panels(board.get("panels", [])):
        for tgt in panel.get("targets", []):
            if _is_sql(tgt):
                yield SqlQuery(uid, "panel", panel["title"], tgt["refId"], tgt["rawSql"], tgt["format"])


def _numeric(value: Any) -> bool:
    return isinstance(value, int | float | Decimal) and not isinstance(value, bool)


def problem(fmt: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """What Grafana would miss in a result of format `fmt` ('' when nothing)."""
    if not rows:
        return "no rows"
    if fmt in ("time_series", "annotation"):
        if "time" not in columns:
            return f"no time column (columns: {', '.join(columns)})"
        when = rows[0][list(columns).index("time")]
        if not isinstance(when, dt.datetime) and not _numeric(when):
            return f"time column holds {type(when).__name__}, not a time"
    if fmt == "annotation" and "text" not in columns:
        return "no text column"
    if fmt == "time_series":
        others = [i for i, c in enumerate(columns) if c != "time"]
        if not any(_numeric(r[i]) for r in rows for i in others):
            return "no numeric value column"
    return ""


def resolve_variables(
    execute: Execute, board: Mapping[str, Any], time_range: TimeRange, given: Mapping[str, Sequence[str]]
) -> dict[str, Selection]:
    """Each SQL variable's selection: the values given, else every value its query offers."""
    out: dict[str, Selection] = {}
    for var in board.get("templating", {}).get("list", []):
        if var.get("type") != "query" or not _is_sql(var):
            continue
        multi = bool(var.get("multi") or var.get("includeAll"))
        if var["name"] in given:
            out[var["name"]] = Selection(tuple(given[var["name"]]), multi)
            continue
        _, rows = execute(expand(str(var["query"]), out, time_range))
        out[var["name"]] = Selection(tuple(str(r[0]) for r in rows), multi)
    return out


def check_board(
    execute: Execute,
    board: Mapping[str, Any],
    time_range: TimeRange,
    given: Mapping[str, Sequence[str]] | None = None,
) -> list[SqlOutcome]:
    """Every SQL query of the board, expanded and run, with what each lacks."""
    selections = resolve_variables(execute, board, time_range, given or {})
    outcomes = []
    for query in iter_sql_queries(board):
        sql = expand(query.sql, selections, time_range)
        columns, rows = execute(sql)
        outcomes.append(SqlOutcome(query, sql, tuple(columns), len(rows), problem(query.fmt, columns, rows)))
    return outcomes


def psycopg_execute(conn: Any) -> Execute:
    """`execute` over a psycopg connection (the query is sent as is: no parameters)."""

    def run(sql: str) -> tuple[list[str], list[Sequence[Any]]]:
        with conn.cursor() as cursor:
            cursor.execute(sql)
            names = [d.name for d in cursor.description or []]
            return names, list(cursor.fetchall())

    return run
