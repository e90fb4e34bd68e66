"""The `changes` table on both stores (a real PostgreSQL server too): recorded, idempotent, closed."""

from __future__ import annotations

import pytest

from tests.changes_support import FIRST_CHECK, SECOND_CHECK, STARTED, finding, record, stored_changes
from tests.store_support import Backend, store_url

SERIES = [("s", "s/a@x")]


def test_changes_are_recorded_once_and_closed_when_no_longer_found(backend: Backend) -> None:
    url = store_url(backend.url)
    record(url, [finding(), finding(metric="e2e_p99", status="suspected")], FIRST_CHECK, SERIES)
    first = stored_changes(url)
    assert [(r["metric"], r["status"], r["open"]) for r in first] == [
        ("e2e_p99", "suspected", True),
        ("tpot_p99", "confirmed", True),
    ]
    tpot = first[1]
    assert tpot["relative_size"] == pytest.approx(0.15)
    assert tpot["first_after_at"].isoformat() == STARTED["run07"]
    assert (tpot["cause"], tpot["detected_at"]) == ("engine.version: 0.26.0 -> 0.27.0", FIRST_CHECK)
    record(url, [finding(), finding(metric="e2e_p99", status="suspected")], SECOND_CHECK, SERIES)
    assert stored_changes(url) == first  # the same check again: the same rows
    assert record(url, [finding()], SECOND_CHECK, SERIES) == 1  # the suspected one is gone
    e2e, tpot = stored_changes(url)
    assert (e2e["open"], e2e["closed_at"]) == (False, SECOND_CHECK)
    assert (tpot["open"], tpot["closed_at"]) == (True, None)
