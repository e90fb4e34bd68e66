"""A whole scrape (2 fake GPUs, one vLLM engine, host) diffed against a golden file that promtool accepts.

Regenerate after an intended change:
    INFERGAUGE_UPDATE_GOLDEN=1 pytest tests/integration/test_exporter_golden_scrape.py
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from exporter.collectors.base import CollectorSet
from exporter.collectors.engine import EngineCollector
from exporter.collectors.gpu import GpuCollector
from exporter.collectors.host import HostCollector
from exporter.discovery import ProcInfo
from exporter.engine_http import EngineHttpFacts
from exporter.engines import EngineInspector
from exporter.nvml.fake import FakeNvml
from exporter.nvml.sampler import GpuSampler
from exporter.nvml.session import NvmlSession
from tests.conftest import FIXTURES, GOLDEN_VLLM

GOLDEN_SCRAPE = FIXTURES / "exporter" / "golden-scrape-fake-2gpu.txt"
H200_SCRAPE = FIXTURES / "exporter" / "h200-metrics.txt"
HOST = {
    "hostname": "golden-host",
    "cpu_model": "Test CPU",
    "cpu_count": 8,
    "memory_bytes": 64 * 2**30,
    "os": "Debian GNU/Linux 12 (bookworm)",
    "kernel": "6.1.0",
    "python": "3.11.7",
}
# What promtool's linter says about dcgm-exporter's own conventions, which we keep on purpose so
# dashboards work with either source: the camelCase `modelName` label and a `COUNTER` in a name.
ALLOWED_LINT = (
    re.compile(r"^DCGM_FI_\w+ label names should be written in 'snake_case' not 'camelCase'$"),
    re.compile(r"^DCGM_FI_DEV_PCIE_REPLAY_COUNTER metric name should not include type 'counter'$"),
)


def golden_scrape() -> str:
    session = NvmlSession(FakeNvml(2))
    sampler = GpuSampler(session, 0)
    sampler.tick()
    sampler.tick()
    argv = tuple((GOLDEN_VLLM / "command.txt").read_text().split())
    inspector = EngineInspector(
        read_procs=lambda: [ProcInfo(613, 1, argv)],
        ports_of=lambda pid: [],
        read_env=lambda pid: {},
        ask_interpreter=lambda p, e: None,
        poll=lambda url, timeout, key: EngineHttpFacts(
            url=url, up=True, ready=True, version="0.26.0", model="tiny-llama"
        ),
        gpu_memory_bytes=143771 * 2**20,
        gpu_name="NVIDIA H200",
    )
    registry = CollectorRegistry()
    registry.register(
        CollectorSet(
            [
                GpuCollector(
                    session,
                    sampler=sampler,
                    hostname="golden-host",
                    name_of_pid=lambda pid: "VLLM::EngineCore",
                ),
                EngineCollector(inspector),
                HostCollector(lambda: HOST),
            ]
        )
    )
    text = generate_latest(registry).decode()
    # durations and reading ages vary run to run: pin them
    timed = r"infergauge_collector_duration_seconds|infergauge_gpu_read_age_seconds"
    return re.sub(rf"^((?:{timed})\{{[^}}]*\}}) .*$", r"\1 0.0", text, flags=re.M)


def promtool_findings(text: str) -> tuple[int, list[str]]:
    done = subprocess.run(
        ["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=30
    )
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    return done.returncode, lines


def test_live_scrape_matches_golden_file() -> None:
    text = golden_scrape()
    if os.environ.get("INFERGAUGE_UPDATE_GOLDEN"):
        GOLDEN_SCRAPE.write_text(text)
    assert text == GOLDEN_SCRAPE.read_text()


@pytest.mark.prometheus
@pytest.mark.skipif(shutil.which("promtool") is None, reason="needs promtool")
@pytest.mark.parametrize("path", [GOLDEN_SCRAPE, H200_SCRAPE], ids=["golden-fake", "h200-capture"])
def test_promtool_accepts_the_scrape(path: Path) -> None:
    rc, findings = promtool_findings(path.read_text())
    unexpected = [f for f in findings if not any(p.match(f) for p in ALLOWED_LINT)]
    assert unexpected == []
    assert rc in (0, 3)  # 3 = lint findings only (all of them dcgm-exporter's conventions, above)
    assert not any(f.startswith("infergauge_") for f in findings)


@pytest.mark.prometheus
@pytest.mark.skipif(shutil.which("promtool") is None, reason="needs promtool")
def test_promtool_rejects_a_broken_scrape() -> None:
    rc, findings = promtool_findings('# TYPE x gauge\nx{a="1" 1\n')
    assert rc == 1
    assert findings


def test_every_exported_name_is_documented_in_metrics_md() -> None:
    doc = (FIXTURES.parents[1] / "docs" / "METRICS.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"^\|\s*`([A-Za-z_:][\w:]*)", doc, flags=re.M))
    exported = set(re.findall(r"^# TYPE (\S+) ", GOLDEN_SCRAPE.read_text(), flags=re.M))
    assert exported - documented == set()
