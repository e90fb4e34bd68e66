"""Noisy runs marked in the store (schema version 5), on both stores (a real PostgreSQL server too): the
check's marks are written, kept by a re-import of the run and cleared when no longer noisy."""

from __future__ import annotations

import json
from pathlib import Path

from loadgen.baseline.gate import suite_settings
from loadgen.baseline.history import read_history
from loadgen.baseline.marks import marks, stored_marks, write_marks
from loadgen.store import schema
from loadgen.store.db import open_store
from loadgen.store.rows import build_row
from tests.store_support import Backend, store_url

REAL_RUN = next(
    p for p in sorted((Path(__file__).parents[1] / "fixtures" / "real-runs").iterdir()) if p.is_dir()
)


def _records(run_id: str, saturated: bool) -> tuple[dict, dict]:
    manifest = json.loads((REAL_RUN / "manifest.json").read_text())
    summary = json.loads((REAL_RUN / "summary.json").read_text())
    manifest["baseline"] = {"suite": "s", "series": "a", "pass": f"pass-{run_id}"}
    summary = {**summary, "run_id": run_id, "client_saturated": {"saturated": saturated}}
    return manifest, summary


def test_the_check_marks_noisy_runs_and_clears_marks_that_no_longer_hold(backend: Backend) -> None:
    url = store_url(backend.url)
    with open_store(url) as store:
        assert store.version() == schema.LATEST >= 5
        for n, saturated in ((1, False), (2, True), (3, False)):
            store.put(build_row(*_records(f"run{n}", saturated)))
        history = read_history(store, "s")
        (key,) = history
        assert [r.run_id for r in history[key]] == ["run1", "run2", "run3"]
        found = marks(history, suite_settings(history))
        assert found == {key: {"run2": "client saturated"}}
        assert write_marks(store, found) == 1
        assert stored_marks(store, key[1]) == {"run2": "client saturated"}
        assert write_marks(store, found) == 0  # the same check again changes nothing
        store.put(build_row(*_records("run2", True)))  # a re-import of the run keeps its mark
        assert stored_marks(store, key[1]) == {"run2": "client saturated"}
        assert write_marks(store, {key: {}}) == 1  # no longer noisy (a bound changed): cleared
        assert stored_marks(store, key[1]) == {}
