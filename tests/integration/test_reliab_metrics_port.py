"""Issue 22 item 4: a busy `--metrics-port` or a bad `--metrics-listen-address` fails in one line,
exit 2, before the run folder exists: no ghost `running` record is left behind, and `store import`
of the results dir adds nothing."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.loadgen_servers import free_port, loadgen_process

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A loopback port something else listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


def _run(engine: str, results: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    cmd = [
        *(sys.executable, "-m", "loadgen.cli.main", "run", "--target", "sim", "--base-url", engine),
        *("--num-prompts", "4", "--rate", "20", "--profile", "short", "--results-dir", str(results)),
        *("--quiet", "--linger", "0", *extra),
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)


def _folders(results: Path) -> list[str]:
    return sorted(p.name for p in results.iterdir() if p.is_dir()) if results.is_dir() else []


@pytest.mark.parametrize("workers", [[], ["--workers", "2"]], ids=["one-process", "workers"])
def test_busy_metrics_port_leaves_no_run_folder(
    engine: str, busy_port: int, tmp_path: Path, workers: list[str]
) -> None:
    results = tmp_path / "results"
    args = ("--metrics-port", str(busy_port), "--metrics-listen-address", "127.0.0.1", *workers)
    result = _run(engine, results, *args)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().count("\n") == 0, result.stderr
    assert f"port {busy_port}" in result.stderr
    assert _folders(results) == []
    imported = loadgen_process("store", "import", str(results))
    assert imported.returncode == 0, imported.stderr
    assert ": 0 new, 0 updated" in imported.stdout, imported.stdout


def test_bad_metrics_listen_address_leaves_no_run_folder(engine: str, tmp_path: Path) -> None:
    results = tmp_path / "results"
    port = str(free_port())  # free, but on an address this host does not have
    result = _run(engine, results, "--metrics-port", port, "--metrics-listen-address", "192.0.2.1")
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().count("\n") == 0, result.stderr
    assert "192.0.2.1" in result.stderr
    assert _folders(results) == []
