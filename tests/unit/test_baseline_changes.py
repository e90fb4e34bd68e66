"""The `changes` table on SQLite: what a check records, idempotently, and how a change gets closed."""

from __future__ import annotations

from pathlib import Path

import pytest

from loadgen.store import schema
from loadgen.store.db import open_store
from loadgen.store.url import StoreURL, parse_store
from tests.changes_support import FIRST_CHECK, SECOND_CHECK, STARTED, finding, record, stored_changes

SERIES = [("s", "s/a@x")]


@pytest.fixture
def url(tmp_path: Path) -> StoreURL:
    parsed = parse_store(f"sqlite:///{tmp_path / 'store.db'}", tmp_path)
    assert parsed is not None
    return parsed


def test_a_finding_is_recorded_with_its_size_runs_times_and_cause(url: StoreURL) -> None:
    record(url, [finding()], FIRST_CHECK, SERIES)
    (row,) = stored_changes(url)
    assert (row["suite"], row["series_key"], row["metric"], row["metric_label"]) == (
        "s",
        "s/a@x",
        "tpot_p99",
        "TPOT p99",
    )
    assert (row["kind"], row["status"], row["open"]) == ("regression", "confirmed", True)
    # relative size = 0.0115 / 0.010 - 1 = 0.15
    assert row["relative_size"] == pytest.approx(0.15)
    assert (row["before_median"], row["after_median"], row["p_value"]) == (0.010, 0.0115, 1e-5)
    assert (row["last_run_before"], row["first_run_after"]) == ("run06", "run07")
    assert row["last_before_at"].isoformat() == STARTED["run06"]
    assert row["first_after_at"].isoformat() == STARTED["run07"]
    assert row["cause"] == "engine.version: 0.26.0 -> 0.27.0"
    assert row["causes"][0]["key"] == "engine.version"
    assert (row["detected_at"], row["closed_at"], row["annotation_id"]) == (FIRST_CHECK, None, None)


def test_checking_again_changes_nothing(url: StoreURL) -> None:
    record(url, [finding(), finding(metric="e2e_p99")], FIRST_CHECK, SERIES)
    first = stored_changes(url)
    record(url, [finding(), finding(metric="e2e_p99")], SECOND_CHECK, SERIES)
    assert stored_changes(url) == first
    assert len(first) == 2


def test_a_suspected_change_confirmed_later_keeps_when_it_was_first_found(url: StoreURL) -> None:
    record(url, [finding(status="suspected", p_value=5e-4)], FIRST_CHECK, SERIES)
    record(url, [finding()], SECOND_CHECK, SERIES)
    (row,) = stored_changes(url)
    assert (row["status"], row["p_value"], row["detected_at"]) == ("confirmed", 1e-5, FIRST_CHECK)


def test_a_change_no_longer_found_is_closed_not_deleted(url: StoreURL) -> None:
    record(url, [finding(status="suspected")], FIRST_CHECK, SERIES)
    assert record(url, [], SECOND_CHECK, SERIES) == 1
    (row,) = stored_changes(url)
    assert (row["open"], row["closed_at"], row["detected_at"]) == (False, SECOND_CHECK, FIRST_CHECK)
    assert record(url, [], SECOND_CHECK, SERIES) == 0  # already closed: nothing more to close


def test_a_superseded_change_is_closed_when_the_next_one_is_found(url: StoreURL) -> None:
    record(url, [finding()], FIRST_CHECK, SERIES)
    later = finding(first_after="run10", first_after_at=STARTED["run10"], last_before="run09", worse=False)
    record(url, [finding(open=False), later], SECOND_CHECK, SERIES)
    rows = {row["first_run_after"]: row for row in stored_changes(url)}
    assert (rows["run07"]["open"], rows["run07"]["closed_at"]) == (False, SECOND_CHECK)
    assert (rows["run10"]["open"], rows["run10"]["kind"], rows["run10"]["closed_at"]) == (
        True,
        "improvement",
        None,
    )


def test_series_outside_the_check_are_left_alone(url: StoreURL) -> None:
    record(url, [finding(series="s/b@x")], FIRST_CHECK, [("s", "s/b@x")])
    record(url, [], SECOND_CHECK, SERIES)  # only s/a@x checked (--series a)
    (row,) = stored_changes(url)
    assert (row["series_key"], row["open"]) == ("s/b@x", True)


def test_the_migration_adds_the_table_to_a_version_2_store(url: StoreURL) -> None:
    with open_store(url, migrate=False) as store:
        for step in (1, 2):
            for statement in schema.MIGRATIONS[step - 1](store.dialect):
                store.conn.execute(statement)
        store.conn.execute(schema.CREATE_VERSION_TABLE)
        for statement, params in schema.set_version(store.dialect, 2):
            store.conn.execute(statement, params)
    with open_store(url) as store:
        assert store.version() == schema.LATEST >= 3
        assert store.conn.execute("SELECT COUNT(*) FROM changes").fetchone()[0] == 0
