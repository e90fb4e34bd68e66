"""Schema version 4 marks shard rows: a row a shard wrote before it (keyed by the run id its shards
share) is marked `shard = i/N` by the migration, so the baselines stop reading it as a whole run."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from loadgen.baseline.history import read_history
from loadgen.store import schema
from loadgen.store.db import open_store
from loadgen.store.rows import build_row
from tests.store_support import Backend, loadgen, store_url

REAL_RUN = next(
    p for p in sorted((Path(__file__).parents[1] / "fixtures" / "real-runs").iterdir()) if p.is_dir()
)


def test_the_migration_marks_shard_rows_written_before_it(backend: Backend) -> None:
    manifest = json.loads((REAL_RUN / "manifest.json").read_text())
    summary = json.loads((REAL_RUN / "summary.json").read_text())
    manifest["baseline"] = {"suite": "nightly", "series": "s"}
    shard = copy.deepcopy(manifest)
    shard["shard"] = {"index": 1, "count": 3}
    shard["run_id"] = summary["run_id"] + "-sharded"
    with open_store(store_url(backend.url), migrate=False) as store:
        for step in range(3):  # the store as version 3 left it
            with store.transaction():
                store.conn.execute(schema.CREATE_VERSION_TABLE)
                for statement in schema.MIGRATIONS[step](store.dialect):
                    store.conn.execute(statement)
                for statement, params in schema.set_version(store.dialect, step + 1):
                    store.conn.execute(statement, params)
        v3_columns = [name for name, _ in schema.RUNS_V1 + schema.RUNS_V2]
        for record, run_id in ((manifest, summary["run_id"]), (shard, summary["run_id"] + "-sharded")):
            row = build_row(record, {**summary, "run_id": run_id})
            values = {c: store._adapt(c, row[c]) for c in v3_columns}
            values["run_id"] = run_id  # before version 4 a shard's row had the shared run id as key
            store.conn.execute(schema.upsert(store.dialect, v3_columns), values)
        assert store.migrate() == (3, schema.LATEST)
        marked = dict(store.conn.execute("SELECT run_id, shard FROM runs").fetchall())
        history = read_history(store)
        info = store.info()
    assert marked == {summary["run_id"]: None, summary["run_id"] + "-sharded": "1/3"}
    assert (info.runs, info.shard_rows) == (1, 1)  # `loadgen store info` counts whole runs
    assert [r.run_id for runs in history.values() for r in runs] == [summary["run_id"]]


def test_merge_refuses_a_bad_store_before_reading_anything(tmp_path: Path) -> None:
    result = loadgen("merge", "--store", "mysql://db/x", "--results-dir", str(tmp_path / "m"), str(tmp_path))
    assert result.exit_code == 2
    assert "unknown store 'mysql://db/x'" in result.output
    assert not (tmp_path / "m").exists()
