"""The version fallback runs the engine's interpreter in the engine's own environment (issue 13 item 4).

A stand-in "vLLM" whose package is importable only through the PYTHONPATH of its own environment:
a tmp dir holding a `vllm` module tree (`python -m vllm.entrypoints.openai.api_server` just sleeps)
and a `vllm-<version>.dist-info`. The exporter's process has no such PYTHONPATH.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from exporter.discovery import read_processes
from exporter.engine_http import EngineHttpFacts
from exporter.engines import EngineInspector, version_from_interpreter
from infergauge.engines import get

FAKE_VERSION = "0.0.1.dev4242"  # no real vLLM has it
MARKER = "only-in-the-engine-env"


def fake_package(root: Path, package: str, version: str) -> None:
    """`package` as a module tree whose API-server module sleeps, plus its dist-info metadata."""
    server = root / package / "entrypoints" / "openai"
    server.mkdir(parents=True)
    for folder in (root / package, root / package / "entrypoints", server):
        (folder / "__init__.py").write_text("")
    (server / "api_server.py").write_text("import time\nprint('ready', flush=True)\ntime.sleep(60)\n")
    info = root / f"{package}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: {version}\n")


@pytest.fixture
def engine_with_own_path(tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    fake_package(tmp_path, get("vllm").package, FAKE_VERSION)
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "INFERGAUGE_TEST_SECRET": MARKER}
    argv = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--port", "1", "--max-num-seqs", "4"]
    proc = subprocess.Popen(argv, env=env, cwd=tmp_path, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        yield proc
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture
def engine_in_its_own_venv(tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    """The stand-in installed in a venv of its own, started with that venv's `bin/python`."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    (site,) = venv.glob("lib/python*/site-packages")
    fake_package(site, get("vllm").package, FAKE_VERSION)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    argv = [str(venv / "bin" / "python"), "-m", "vllm.entrypoints.openai.api_server", "--port", "1"]
    proc = subprocess.Popen(argv, env=env, cwd=tmp_path, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        yield proc
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_the_exporter_itself_cannot_see_the_package() -> None:
    # the premise: without the engine's environment the version is not findable from here
    with pytest.raises(importlib.metadata.PackageNotFoundError):
        importlib.metadata.version(get("vllm").package)


def test_version_read_with_the_engines_own_environment(engine_with_own_path: subprocess.Popen[str]) -> None:
    assert version_from_interpreter(engine_with_own_path.pid, "vllm") == FAKE_VERSION
    assert "INFERGAUGE_TEST_SECRET" not in os.environ  # nothing of it came into the exporter


def test_discovered_engine_gets_that_version_and_shows_none_of_its_environment(
    engine_with_own_path: subprocess.Popen[str],
) -> None:
    pid = engine_with_own_path.pid
    inspector = EngineInspector(
        read_procs=lambda: [p for p in read_processes() if p.pid == pid],
        poll=lambda url, timeout, key: EngineHttpFacts(url=url),  # no HTTP: the fallback must answer
        ports_of=lambda p: [],
    )
    started = time.monotonic()
    (report,) = inspector.reports(fresh=True)
    assert (report.engine, report.pid, report.version) == ("vllm", pid, FAKE_VERSION)
    assert report.params["max_num_seqs"] == 4
    assert time.monotonic() - started < 10
    assert MARKER not in json.dumps(report.as_dict())


def test_version_read_with_the_venv_the_engine_was_started_with(
    engine_in_its_own_venv: subprocess.Popen[str],
) -> None:
    # /proc/<pid>/exe is the base interpreter (the venv's bin/python is a symlink): argv[0] is not
    assert version_from_interpreter(engine_in_its_own_venv.pid, "vllm") == FAKE_VERSION
