"""The results store against real databases: SQLite and a real PostgreSQL server started here, fed by
runs of the simulated engine through the `loadgen` CLI."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from loadgen.cli.main import cli
from loadgen.store import schema
from loadgen.store.db import open_store
from loadgen.store.url import StoreURL, parse_store
from tests.loadgen_servers import free_port
from tests.pg_cluster import NoPostgres, PgCluster, pg_cluster, server_bin

pytestmark = pytest.mark.xdist_group("store")


@pytest.fixture(scope="module")
def pg() -> Iterator[PgCluster]:
    """A real PostgreSQL server for this module (a missing server fails the tests, never skips them)."""
    try:
        with pg_cluster() as cluster:
            yield cluster
    except NoPostgres as exc:
        pytest.fail(f"cannot start the test PostgreSQL: {exc}")


@dataclass
class Backend:
    """One store under test: the --store value, its printable form, and how to take it down."""

    name: str
    url: str
    public: str
    secret: str | None
    outage: Callable[[], contextlib.AbstractContextManager[None]]


@contextlib.contextmanager
def _sqlite_outage(path: Path) -> Iterator[None]:
    """The database file replaced by a directory: SQLite refuses to open it."""
    aside = path.with_name(path.name + ".aside")
    path.rename(aside)
    path.mkdir()
    try:
        yield
    finally:
        path.rmdir()
        aside.rename(path)


@contextlib.contextmanager
def _pg_outage(cluster: PgCluster) -> Iterator[None]:
    cluster.stop()
    try:
        yield
    finally:
        cluster.start()


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    """Each test runs once on SQLite and once on a fresh database of the real PostgreSQL server."""
    if request.param == "sqlite":
        path = tmp_path / "store" / "runs.db"
        url = f"sqlite:///{path}"
        return Backend("sqlite", url, url, None, lambda: _sqlite_outage(path))
    cluster: PgCluster = request.getfixturevalue("pg")
    db = cluster.create_database()
    return Backend(
        "postgresql",
        cluster.url(db),
        cluster.url(db, with_password=False),
        cluster.password,
        lambda: _pg_outage(cluster),
    )


def loadgen(*args: str) -> Result:
    """The loadgen CLI in this process (stdout and stderr kept apart)."""
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def sim_run(results: Path, store: str, *extra: str) -> Result:
    """A short run against the embedded simulated engine, no exporter, no lingering."""
    exporter = f"http://127.0.0.1:{free_port()}"  # nothing listens: the run has no exporter facts
    return loadgen(
        "run",
        "--target",
        "sim",
        "--num-prompts",
        "4",
        "--rate",
        "inf",
        "--linger",
        "0",
        "--metrics-port",
        "0",
        "--quiet",
        "--exporter-url",
        exporter,
        "--results-dir",
        str(results),
        "--store",
        store,
        *extra,
    )


def store_url(url: str) -> StoreURL:
    """The parsed --store value of a test store."""
    parsed = parse_store(url, ".")
    assert parsed is not None
    return parsed


COLUMNS = ("run_id", "status", "partial", "output_throughput", "ttft_p99_s", "e2e_p99_s", "row_hash")


def stored(url: str) -> dict[str, dict[str, Any]]:
    """Every row of the store's runs table (a few columns), by run_id."""
    with open_store(store_url(url), migrate=False) as store:
        found = store.conn.execute(f"SELECT {', '.join(COLUMNS)} FROM runs ORDER BY run_id").fetchall()
    return {row[0]: dict(zip(COLUMNS, row, strict=True)) for row in found}


def run_ids(results: Path) -> list[str]:
    """Run folders under a results dir."""
    return sorted(p.name for p in results.iterdir() if (p / "summary.json").is_file())


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
    assert (json.loads(raw) if isinstance(raw, str) else raw) == manifest


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


def test_a_store_outage_between_runs_loses_no_run(backend: Backend, tmp_path: Path) -> None:
    results = tmp_path / "results"
    assert sim_run(results, backend.url).exit_code == 0
    with backend.outage():
        during = sim_run(results, backend.url)
    assert sim_run(results, backend.url).exit_code == 0

    assert during.exit_code == 0  # the run's exit status is the run's, not the store's
    warnings = [line for line in during.stderr.splitlines() if line.startswith("warning: results store")]
    assert len(warnings) == 1, during.stderr
    assert backend.public in warnings[0]
    assert f"loadgen store import {results}" in warnings[0]
    folders = run_ids(results)
    assert len(folders) == 3
    missing = sorted(set(folders) - set(stored(backend.url)))
    assert missing == [folders[1]]
    assert missing[0] in warnings[0]

    later = loadgen("store", "import", str(results), "--store", backend.url)
    assert "1 new, 0 updated, 2 skipped, 0 unreadable" in later.stdout
    assert sorted(stored(backend.url)) == folders


def test_the_password_never_reaches_output_or_records(pg: PgCluster, tmp_path: Path) -> None:
    url = pg.url(pg.create_database())
    results = tmp_path / "results"
    outputs = [sim_run(results, url)]
    with _pg_outage(pg):
        outputs.append(sim_run(results, url))
    outputs += [loadgen("store", cmd, "--store", url) for cmd in ("info", "migrate")]
    outputs.append(loadgen("store", "import", str(results), "--store", url))
    assert "warning: results store postgresql://postgres@127.0.0.1" in outputs[1].stderr
    for result in outputs:
        assert result.exit_code == 0, result.output
        assert pg.password not in result.output
    written = {p: p.read_bytes() for p in results.rglob("*") if p.is_file()}
    assert len(written) >= 7  # two run folders of three files, and runs.csv
    assert not [p for p, data in written.items() if pg.password.encode() in data]


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


@pytest.mark.parametrize("command", ["run", "sweep"])
def test_a_bad_store_is_a_usage_error_before_any_run(command: str, tmp_path: Path) -> None:
    args = [command, "--target", "sim", "--results-dir", str(tmp_path), "--store", "mysql://u:pw9@h/db"]
    if command == "sweep":
        args += ["--concurrency", "1"]
    result = loadgen(*args)
    assert result.exit_code == 2
    assert "unknown store 'mysql://u@h/db': use sqlite:///PATH" in result.output
    assert "pw9" not in result.output
    assert not any(tmp_path.iterdir())


def test_info_on_a_missing_sqlite_store_creates_nothing(tmp_path: Path) -> None:
    result = loadgen("store", "info", "--results-dir", str(tmp_path / "results"))
    assert result.exit_code == 1
    assert f"sqlite:///{tmp_path / 'results' / 'infergauge.db'}: no such file" in result.stderr
    assert not any(tmp_path.iterdir())


def test_without_server_binaries_the_fixture_says_what_to_install(tmp_path: Path) -> None:
    with pytest.raises(NoPostgres, match=r"apt-get install postgresql"):
        server_bin(str(tmp_path))
    (tmp_path / "9" / "bin").mkdir(parents=True)
    (tmp_path / "9" / "bin" / "pg_ctl").touch()
    (tmp_path / "15" / "bin").mkdir(parents=True)
    (tmp_path / "15" / "bin" / "pg_ctl").touch()
    assert server_bin(str(tmp_path)) == tmp_path / "15" / "bin"  # the newest major, not the last name


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
