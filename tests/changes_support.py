"""Helpers of the `changes` table tests: findings as a check makes them, and the rows a store holds."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

from loadgen.baseline.changes import change_rows
from loadgen.baseline.check import Finding
from loadgen.store.changes import read_changes, write_changes
from loadgen.store.db import open_store
from loadgen.store.url import StoreURL

FIRST_CHECK = datetime(2026, 12, 9, 2, 30, tzinfo=UTC)
SECOND_CHECK = datetime(2026, 12, 10, 2, 30, tzinfo=UTC)
STARTED = {f"run{i:02d}": f"2026-12-{i + 1:02d}T02:00:00+00:00" for i in range(12)}
VERSION = {"rank": 1, "key": "engine.version", "a": "0.26.0", "b": "0.27.0", "group": "version"}


def finding(**changes: Any) -> Finding:
    """A confirmed, open TPOT p99 regression of 15% at run07 of s/a@x, explained by the version."""
    base = Finding(
        suite="s",
        series="s/a@x",
        metric="tpot_p99",
        status="confirmed",
        worse=True,
        open=True,
        before_median=0.010,
        after_median=0.0115,
        p_value=1e-5,
        last_before="run06",
        first_after="run07",
        first_after_at=STARTED["run07"],
        causes=(VERSION,),
    )
    return dataclasses.replace(base, **changes)


def record(url: StoreURL, findings: list[Finding], now: datetime, checked: list[tuple[str, str]]) -> int:
    """Write the findings of one check of the `checked` series; returns how many were closed."""
    with open_store(url) as store:
        return write_changes(store, change_rows(findings, STARTED), checked, now)


def stored_changes(url: StoreURL) -> list[dict[str, Any]]:
    """Every row of the changes table, times as aware datetimes whatever the dialect."""
    with open_store(url) as store:
        rows = read_changes(store)
    for row in rows:
        for column in ("last_before_at", "first_after_at", "detected_at", "closed_at"):
            value = row[column]
            if isinstance(value, str):
                row[column] = datetime.fromisoformat(value)
    return rows
