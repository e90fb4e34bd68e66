"""Every run writes its row: loadgen run / sweep / experiment run against the simulated engine, on
SQLite and on a real PostgreSQL server started by the tests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loadgen.store import schema
from loadgen.store.db import open_store
from tests.loadgen_servers import free_port
from tests.store_support import Backend, loadgen, run_ids, sim_run, store_url, stored

pytestmark = pytest.mark.xdist_group("store")  # one worker, one PostgreSQL server


def test_runs_of_the_simulated_engine_write_their_rows(backend: Backend, tmp_path: Path) -> None:
    results = tmp_path / "results"
    for _ in range(2):
        assert sim_run(results, backend.url).exit_code == 0
    rows = stored(backend.url)
    assert sorted(rows) == run_ids(results)
    for run_id, row in rows.items():
        summary = json.loads((results / run_id / "summary.json").read_text())
        assert row["status"] == "ok"
        assert not row["partial"]
        assert row["output_throughput"] == pytest.approx(summary["output_token_throughput"])
        assert row["ttft_p99_s"] == pytest.approx(summary["ttft_s"]["p99"])
        assert row["e2e_p99_s"] == pytest.approx(summary["e2e_s"]["p99"])
    info = loadgen("store", "info", "--store", backend.url)
    assert info.exit_code == 0
    assert f"schema version {schema.LATEST}, 2 runs" in info.stdout


def test_the_manifest_is_stored_as_json_a_query_can_read(backend: Backend, tmp_path: Path) -> None:
    results = tmp_path / "results"
    assert sim_run(results, backend.url).exit_code == 0
    (run_id,) = run_ids(results)
    manifest = json.loads((results / run_id / "manifest.json").read_text())
    with open_store(store_url(backend.url), migrate=False) as store:
        raw = store.conn.execute("SELECT manifest FROM runs").fetchone()[0]
        version, column = store.conn.execute(ENGINE_VERSION[backend.name]).fetchone()
    assert (json.loads(raw) if isinstance(raw, str) else raw) == manifest
    assert version
    assert version == column == manifest["engine"]["version"]  # a panel can filter on any manifest fact


# the engine version read out of the stored manifest, as a Grafana SQL panel would
ENGINE_VERSION = {
    "sqlite": "SELECT json_extract(manifest, '$.engine.version'), engine_version FROM runs",
    "postgresql": "SELECT manifest->'engine'->>'version', engine_version FROM runs",
}


def test_the_default_store_is_a_sqlite_file_under_the_results_dir(tmp_path: Path) -> None:
    results = tmp_path / "results"
    exporter = f"http://127.0.0.1:{free_port()}"
    args = ["run", "--target", "sim", "--num-prompts", "2", "--linger", "0", "--metrics-port", "0"]
    result = loadgen(*args, "--quiet", "--exporter-url", exporter, "--results-dir", str(results))
    assert result.exit_code == 0
    assert list(stored(f"sqlite:///{results / 'infergauge.db'}")) == run_ids(results)


def test_store_none_writes_no_database(tmp_path: Path) -> None:
    results = tmp_path / "results"
    assert sim_run(results, "none").exit_code == 0
    assert not list(results.glob("*.db*"))
    assert len(run_ids(results)) == 1


def test_every_point_of_a_sweep_writes_its_row(backend: Backend, tmp_path: Path) -> None:
    results = tmp_path / "results"
    exporter = f"http://127.0.0.1:{free_port()}"
    args = ["sweep", "--concurrency", "1,2", "--num-prompts", "4", "--profile", "short", "--quiet"]
    args += ["--metrics-port", "0", "--exporter-url", exporter, "--results-dir", str(results)]
    result = loadgen(*args, "--store", backend.url)
    assert result.exit_code == 0, result.output
    points = run_ids(results)
    assert len(points) == 2
    assert sorted(stored(backend.url)) == points


def test_every_run_of_an_experiment_plan_writes_its_row(backend: Backend, tmp_path: Path) -> None:
    results = tmp_path / "results"
    sim = "python -m simengine --personality vllm --port {port} --time-scale 20"
    plan = tmp_path / "plan.yaml"
    plan.write_text(
        f"name: t\nresults_dir: {results}\n"
        "defaults: {num_prompts: 4, seed: 7, metrics_port: 0, profile: short}\n"
        f"engines:\n  sim:\n    kind: launch\n    command: {sim}\n    health_timeout_s: 30\n"
        "phases:\n  - {name: p, kind: baseline, workloads: [short], concurrency: [1, 2]}\n"
    )
    result = loadgen("experiment", "run", str(plan), "--store", backend.url)
    assert result.exit_code == 0, result.output
    runs = run_ids(results)
    assert len(runs) == 2
    assert sorted(stored(backend.url)) == runs


def test_loadgen_store_names_the_store_and_the_flag_beats_it(
    backend: Backend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    results = tmp_path / "results"
    monkeypatch.setenv("LOADGEN_STORE", backend.url)  # as the shipped CronJob and CI job set it
    assert sim_run(results, None).exit_code == 0
    from_env = set(run_ids(results))
    assert sorted(stored(backend.url)) == sorted(from_env)
    assert sim_run(results, "none").exit_code == 0  # the flag wins
    assert sorted(stored(backend.url)) == sorted(from_env)
    assert len(run_ids(results)) == 2
    assert "1 new, 0 updated, 1 skipped" in loadgen("store", "import", str(results)).stdout
