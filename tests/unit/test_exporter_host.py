"""Host facts parsing and the engine version asked of the engine's own interpreter."""

from __future__ import annotations

import importlib.metadata
import os

from exporter.engines import version_from_interpreter
from exporter.host import cpu_model, host_facts, os_name


def test_cpu_model_from_cpuinfo() -> None:
    cpuinfo = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Platinum 8480C\n"
    assert cpu_model(cpuinfo) == "Intel(R) Xeon(R) Platinum 8480C"


def test_os_name_from_os_release() -> None:
    assert os_name('NAME="Ubuntu"\nPRETTY_NAME="Ubuntu 24.04.3 LTS"\n') == "Ubuntu 24.04.3 LTS"


def test_host_facts_have_the_manifest_keys() -> None:
    facts = host_facts()
    assert set(facts) == {"hostname", "cpu_model", "cpu_count", "memory_bytes", "os", "kernel", "python"}
    assert facts["memory_bytes"] > 0
    assert facts["cpu_count"] >= 1


def test_version_from_the_engines_own_interpreter() -> None:
    # this test process stands in for an engine: its interpreter has the infergauge package installed
    assert version_from_interpreter(os.getpid(), "simengine") == importlib.metadata.version("infergauge")
    assert version_from_interpreter(2**22 + 12345, "vllm") is None  # no such process
