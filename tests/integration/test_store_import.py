"""`loadgen store import` and the schema's migrations, on SQLite and a real PostgreSQL server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loadgen.store import schema
from loadgen.store.db import open_store
from tests.store_support import Backend, loadgen, run_ids, sim_run, store_url, stored

pytestmark = pytest.mark.xdist_group("store")  # one worker, one PostgreSQL server


def _break(results: Path, run_id: str) -> None:
    """A folder whose summary is cut off mid-write."""
    path = results / run_id / "summary.json"
    path.write_text(path.read_text()[:40])


def _make_partial(results: Path, run_id: str) -> None:
    path = results / run_id / "summary.json"
    summary = json.loads(path.read_text())
    path.write_text(json.dumps({**summary, "partial": True, "partial_reason": "interrupted"}))


def test_import_loads_every_folder_once(backend: Backend, tmp_path: Path) -> None:
    results = tmp_path / "results"
    for _ in range(4):
        assert sim_run(results, "none").exit_code == 0
    first, partial, broken, _ = run_ids(results)
    _make_partial(results, partial)
    _break(results, broken)

    once = loadgen("store", "import", str(results), "--store", backend.url)
    assert once.exit_code == 0, once.output
    assert "3 new, 0 updated, 0 skipped, 1 unreadable" in once.stdout
    assert f"unreadable: {broken}: invalid JSON" in once.stderr
    rows = stored(backend.url)
    assert sorted(rows) == sorted(set(run_ids(results)) - {broken})
    assert rows[partial]["status"] == "partial"
    assert rows[partial]["partial"]

    twice = loadgen("store", "import", str(results), "--store", backend.url)
    assert "0 new, 0 updated, 3 skipped, 1 unreadable" in twice.stdout
    assert stored(backend.url) == rows  # nothing changed, not even a hash

    _make_partial(results, first)  # a record that changed since: its row is replaced
    third = loadgen("store", "import", str(results), "--store", backend.url)
    assert "0 new, 1 updated, 2 skipped, 1 unreadable" in third.stdout
    assert stored(backend.url)[first]["status"] == "partial"


def _at_version_1(url: str) -> None:
    """A database as a loadgen of schema version 1 left it, with one run row."""
    with open_store(store_url(url), migrate=False) as store:
        d = store.dialect
        with store.transaction():
            store.conn.execute(schema.CREATE_VERSION_TABLE)
            for statement in schema.MIGRATIONS[0](d):
                store.conn.execute(statement)
            for statement, params in schema.set_version(d, 1):
                store.conn.execute(statement, params)
            insert = f"INSERT INTO runs (run_id, status) VALUES ({d.placeholder('id')}, 'ok')"
            store.conn.execute(insert, {"id": "old-run"})


def test_migrate_brings_an_empty_database_to_the_latest_version(backend: Backend) -> None:
    result = loadgen("store", "migrate", "--store", backend.url)
    assert result.exit_code == 0, result.output
    assert f"schema version 0 -> {schema.LATEST}" in result.stdout
    again = loadgen("store", "migrate", "--store", backend.url)
    assert f"schema version {schema.LATEST} -> {schema.LATEST}" in again.stdout
    assert stored(backend.url) == {}


def test_opening_a_version_1_database_migrates_it_and_keeps_its_rows(
    backend: Backend, tmp_path: Path
) -> None:
    _at_version_1(backend.url)
    assert "schema version 1 (migrated to" in loadgen("store", "info", "--store", backend.url).stdout
    results = tmp_path / "results"
    assert sim_run(results, backend.url).exit_code == 0  # the run's write migrates first
    rows = stored(backend.url)
    assert sorted(rows) == sorted(["old-run", *run_ids(results)])
    assert rows["old-run"]["row_hash"] is None  # the column version 2 added
    assert (
        f"schema version {schema.LATEST}, 2 runs" in loadgen("store", "info", "--store", backend.url).stdout
    )


def test_a_newer_schema_is_refused_by_name(backend: Backend, tmp_path: Path) -> None:
    loadgen("store", "migrate", "--store", backend.url)
    newer = schema.LATEST + 1
    with open_store(store_url(backend.url), migrate=False) as store:
        for statement, params in schema.set_version(store.dialect, newer):
            store.conn.execute(statement, params)
    info = loadgen("store", "info", "--store", backend.url)
    assert info.exit_code == 0
    assert f"schema version {newer} (newer than this loadgen's {schema.LATEST}" in info.stdout
    migrate = loadgen("store", "migrate", "--store", backend.url)
    assert migrate.exit_code == 1
    assert f"schema version {newer}, newer than this loadgen's {schema.LATEST}" in migrate.stderr
    results = tmp_path / "results"
    run = sim_run(results, backend.url)
    assert run.exit_code == 0  # the run itself is kept; its row waits for a newer loadgen
    assert f"schema version {newer}" in run.stderr
    assert len(run_ids(results)) == 1


def test_a_crashed_run_folder_is_imported_marked_crashed_and_partial(
    backend: Backend, tmp_path: Path
) -> None:
    results = tmp_path / "results"
    assert sim_run(results, "none").exit_code == 0
    (run_id,) = run_ids(results)
    folder = results / run_id  # as a killed loadgen leaves it: the start manifest and the journal
    (folder / "summary.json").unlink()
    manifest = json.loads((folder / "manifest.json").read_text())
    (folder / "manifest.json").write_text(json.dumps({**manifest, "status": "running", "ended_at": None}))
    result = loadgen("store", "import", str(results), "--store", backend.url)
    assert "1 new, 0 updated, 0 skipped, 0 unreadable" in result.stdout
    row = stored(backend.url)[run_id]
    assert row["status"] == "crashed"
    assert row["partial"]
    assert row["e2e_p99_s"] is not None  # the summary load_run rebuilt from the journal's lines
