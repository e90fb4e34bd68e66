"""Fixtures of the integration tests: a real PostgreSQL server, and the results stores under test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.pg_cluster import NoPostgres, PgCluster, pg_cluster
from tests.store_support import Backend, pg_outage, sqlite_outage


@pytest.fixture(scope="session")
def pg() -> Iterator[PgCluster]:
    """A real PostgreSQL server for the session (a missing server fails the tests, never skips them)."""
    try:
        with pg_cluster() as cluster:
            yield cluster
    except NoPostgres as exc:
        pytest.fail(f"cannot start the test PostgreSQL: {exc}")


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    """Each test runs once on SQLite and once on a fresh database of the real PostgreSQL server."""
    if request.param == "sqlite":
        path = tmp_path / "store" / "runs.db"
        url = f"sqlite:///{path}"
        return Backend("sqlite", url, url, None, lambda: sqlite_outage(path))
    cluster: PgCluster = request.getfixturevalue("pg")
    db = cluster.create_database()
    return Backend(
        "postgresql",
        cluster.url(db),
        cluster.url(db, with_password=False),
        cluster.password,
        lambda: pg_outage(cluster),
    )


@pytest.fixture(scope="module")
def engine() -> Iterator[str]:
    """The embedded simulated engine (vLLM personality) of a test module, as its base URL."""
    from simengine.embedded import EmbeddedEngine

    sim = EmbeddedEngine([])
    sim.start()
    try:
        yield str(sim.base_url).rstrip("/")
    finally:
        sim.stop()
