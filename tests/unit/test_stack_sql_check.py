"""grafana.dashgen.sqlcheck on a real (SQLite, in-memory) database: variables resolved in order, each
query expanded and run, and what a panel would miss named."""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from grafana.dashgen.sql import SQL_DS, sql_annotation, sql_target, sql_var  # noqa: E402
from grafana.dashgen.sqlcheck import check_board, problem  # noqa: E402
from grafana.dashgen.sqlmacros import TimeRange  # noqa: E402

T0 = datetime(2026, 12, 1, tzinfo=UTC)
RANGE = TimeRange(T0, datetime(2026, 12, 2, tzinfo=UTC))
DAY0 = int(T0.timestamp())


def _execute(conn: sqlite3.Connection) -> Any:
    def run(sql: str) -> tuple[list[str], list[Sequence[Any]]]:
        cursor = conn.execute(sql)
        return [d[0] for d in cursor.description], cursor.fetchall()

    return run


def _db() -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE runs (t INTEGER, suite TEXT, series TEXT, v REAL)")
    rows = [
        (DAY0 + 3600, "nightly", "a", 1.0),
        (DAY0 + 7200, "o'clock", "b", 2.0),
        (DAY0 - 60, "old", "c", 3.0),
    ]
    conn.executemany("INSERT INTO runs VALUES (?, ?, ?, ?)", rows)
    return conn


def _board(panel_sql: str) -> dict[str, Any]:
    return {
        "uid": "t",
        "templating": {
            "list": [
                sql_var(
                    "suite", "Suite", "SELECT DISTINCT suite FROM runs WHERE $__unixEpochFilter(t) ORDER BY 1"
                ),
                sql_var(
                    "series", "Series", "SELECT DISTINCT series FROM runs WHERE suite IN ($suite) ORDER BY 1"
                ),
            ]
        },
        "annotations": {
            "list": [sql_annotation("marks", 'SELECT t AS "time", series AS text FROM runs', "red")]
        },
        "panels": [{"title": "v", "datasource": SQL_DS, "targets": [sql_target(panel_sql)]}],
    }


def test_variables_offer_every_value_in_order_and_panels_see_them_quoted() -> None:
    sql = 'SELECT t AS "time", v FROM runs WHERE $__unixEpochFilter(t) AND series IN ($series) ORDER BY t'
    outcomes = check_board(_execute(_db()), _board(sql), RANGE)
    by_title = {o.query.title: o for o in outcomes}
    assert [o.problem for o in outcomes] == ["", "", "", ""]
    assert by_title["suite"].rows == 2  # "old" ran before the range
    assert "IN ('nightly','o''clock')" in by_title["series"].expanded
    assert "series IN ('a','b')" in by_title["v"].expanded
    assert (by_title["v"].columns, by_title["v"].rows) == (("time", "v"), 2)


def test_a_value_given_replaces_what_the_query_offers() -> None:
    sql = 'SELECT t AS "time", v FROM runs WHERE series IN ($series)'
    outcomes = check_board(_execute(_db()), _board(sql), RANGE, {"suite": ["nightly"]})
    assert {o.query.title: o.rows for o in outcomes}["v"] == 1


def test_what_a_panel_would_miss_is_named() -> None:
    missing_time = check_board(_execute(_db()), _board("SELECT t, v FROM runs"), RANGE)[-1]
    assert missing_time.problem == "no time column (columns: t, v)"
    text_values = check_board(_execute(_db()), _board('SELECT t AS "time", series FROM runs'), RANGE)[-1]
    assert text_values.problem == "no numeric value column"
    assert problem("table", ["a"], []) == "no rows"
    assert problem("time_series", ["time", "v"], [("2026-12-01", 1.0)]) == "time column holds str, not a time"
    assert problem("annotation", ["time"], [(1, "x")]) == "no text column"
    assert problem("table", ["a"], [("x",)]) == ""
