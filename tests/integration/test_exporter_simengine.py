"""Discovery of a real running simulated-engine process: launch flags from /proc, version over HTTP."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry

from exporter.collectors.base import CollectorSet
from exporter.collectors.engine import EngineCollector
from exporter.discovery import read_processes
from exporter.engines import EngineInspector
from infergauge.engines.resolve import CMDLINE
from infergauge.redact import REDACTED
from tests.conftest import REPO_ROOT


@pytest.fixture
def simengine() -> Iterator[tuple[subprocess.Popen[str], str]]:
    argv = [
        sys.executable,
        "-m",
        "simengine",
        "--host",
        "127.0.0.1",
        "--port",
        "0",
        "--personality",
        "vllm",
        "--max-num-seqs",
        "7",
        "--gpu-memory-utilization",
        "0.8",
        "--api-key",
        "sk-live-999",
    ]
    proc = subprocess.Popen(argv, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # "... listening on http://127.0.0.1:PORT"
        match = re.search(r"listening on (http://\S+)", line)
        assert match, line
        yield proc, match.group(1)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_discovers_running_simengine(simengine: tuple[subprocess.Popen[str], str]) -> None:
    proc, url = simengine
    # the real /proc, narrowed to this test's engine so simulators of tests running beside it are not polled
    inspector = EngineInspector(
        http_timeout_s=2.0,
        api_key="sk-live-999",
        ask_interpreter=lambda p, e: None,
        read_procs=lambda: [p for p in read_processes() if proc.pid in (p.pid, p.ppid)],
    )
    reports = [r for r in inspector.reports(fresh=True) if r.pid == proc.pid]
    assert len(reports) == 1
    report = reports[0]
    assert report.engine == "simengine"
    assert report.url == url  # --port 0: the port came from the process's listening socket
    assert report.up is True
    assert report.ready is True  # the simulated vLLM's /health said 200
    assert report.version  # answered by the vLLM personality's /version
    assert report.params["max_num_seqs"] == 7
    assert report.params["gpu_memory_utilization"] == 0.8
    assert report.param_sources["max_num_seqs"] == CMDLINE
    assert "sk-live-999" not in " ".join(report.cmdline)
    assert REDACTED in report.cmdline

    registry = CollectorRegistry()
    registry.register(CollectorSet([EngineCollector(inspector)]))
    base = {"engine": "simengine", "url": url, "model": report.model or ""}
    assert registry.get_sample_value("infergauge_engine_up", base) == 1.0
    assert registry.get_sample_value("infergauge_engine_ready", base) == 1.0


def test_stopped_engine_is_down_and_the_collector_still_succeeds() -> None:
    # issue 13 item 2: an engine that is simply stopped is `up 0`; the collector did its job (success 1)
    inspector = EngineInspector(["http://127.0.0.1:9"], discover=False, http_timeout_s=0.5)
    registry = CollectorRegistry()
    registry.register(CollectorSet([EngineCollector(inspector)]))
    labels = {"engine": "unknown", "url": "http://127.0.0.1:9", "model": ""}
    assert registry.get_sample_value("infergauge_engine_up", labels) == 0.0
    assert registry.get_sample_value("infergauge_engine_ready", labels) == 0.0
    assert registry.get_sample_value("infergauge_collector_success", {"collector": "engine"}) == 1.0
