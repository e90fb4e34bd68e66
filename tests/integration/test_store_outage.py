"""A store that is down, refuses or is misnamed never costs a run, and its password is never shown."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.pg_cluster import NoPostgres, PgCluster, server_bin
from tests.store_support import Backend, loadgen, pg_outage, run_ids, sim_run, stored

pytestmark = pytest.mark.xdist_group("store")  # one worker, one PostgreSQL server


def test_a_store_outage_between_runs_loses_no_run(backend: Backend, tmp_path: Path) -> None:
    results = tmp_path / "results"
    assert sim_run(results, backend.url).exit_code == 0
    before = set(run_ids(results))
    with backend.outage():
        during = sim_run(results, backend.url)
    (lost,) = set(run_ids(results)) - before  # run ids of one second need not sort in run order
    assert sim_run(results, backend.url).exit_code == 0

    assert during.exit_code == 0  # the run's exit status is the run's, not the store's
    warnings = [line for line in during.stderr.splitlines() if line.startswith("warning: results store")]
    assert len(warnings) == 1, during.stderr
    assert backend.public in warnings[0]
    assert f"loadgen store import {results}" in warnings[0]
    folders = run_ids(results)
    assert len(folders) == 3
    assert sorted(set(folders) - set(stored(backend.url))) == [lost]
    assert lost in warnings[0]

    later = loadgen("store", "import", str(results), "--store", backend.url)
    assert "1 new, 0 updated, 2 skipped, 0 unreadable" in later.stdout
    assert sorted(stored(backend.url)) == folders


def test_the_password_never_reaches_output_or_records(pg: PgCluster, tmp_path: Path) -> None:
    url = pg.url(pg.create_database())
    results = tmp_path / "results"
    outputs = [sim_run(results, url)]
    with pg_outage(pg):
        outputs.append(sim_run(results, url))
    wrong = url.replace(pg.password, "not-" + pg.password)  # a store that refuses the login
    outputs.append(sim_run(results, wrong))
    outputs += [loadgen("store", cmd, "--store", url) for cmd in ("info", "migrate")]
    outputs.append(loadgen("store", "import", str(results), "--store", url))
    assert "warning: results store postgresql://postgres@127.0.0.1" in outputs[1].stderr
    assert "password authentication failed" in outputs[2].stderr
    for result in outputs:
        assert result.exit_code == 0, result.output
        assert pg.password not in result.output
    written = {p: p.read_bytes() for p in results.rglob("*") if p.is_file()}
    assert len(written) >= 10  # three run folders of three files, and runs.csv
    assert not [p for p, data in written.items() if pg.password.encode() in data]


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


def test_the_password_can_come_from_pgpassword(
    pg: PgCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    database = pg.create_database()
    url = pg.url(database, with_password=False)
    results = tmp_path / "results"
    monkeypatch.setenv("PGPASSWORD", "wrong")
    assert "password authentication failed" in sim_run(results, url).stderr  # libpq reads it
    refused = set(run_ids(results))
    monkeypatch.setenv("PGPASSWORD", pg.password)
    run = sim_run(results, url)
    assert "warning" not in run.stderr
    assert sorted(stored(pg.url(database))) == sorted(set(run_ids(results)) - refused)


@contextlib.contextmanager
def _small_tmpfs(path: Path) -> Iterator[Path]:
    """A 256 KiB tmpfs at `path` (skips where mounting is not allowed), unmounted after."""
    path.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(path)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def test_a_full_store_costs_a_warning_not_the_run(tmp_path: Path) -> None:
    results = tmp_path / "results"
    with _small_tmpfs(tmp_path / "disk") as disk:
        url = f"sqlite:///{disk / 'runs.db'}"
        assert loadgen("store", "migrate", "--store", url).exit_code == 0
        with contextlib.suppress(OSError), (disk / "filler").open("wb") as fh:  # fill it to the last page
            while True:
                fh.write(b"\0" * 4096)
                fh.flush()
        full = sim_run(results, url)
        assert full.exit_code == 0
        assert f"warning: results store {url} did not take run" in full.stderr
        assert "full" in full.stderr  # sqlite: "database or disk is full"
        (disk / "filler").unlink()
        later = loadgen("store", "import", str(results), "--store", url)
    assert "1 new, 0 updated, 0 skipped, 0 unreadable" in later.stdout
