"""On a real NVIDIA GPU (marked `gpu`, skipped where NVML is absent): scrape and manifest make sense."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from exporter.app import Exporter, ExporterConfig
from exporter.sanity import scrape_problems


def _nvml_available() -> bool:
    try:
        import pynvml

        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
    except Exception:
        return False
    return True


pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not _nvml_available(), reason="needs NVML (an NVIDIA GPU and driver)"),
]


@pytest.fixture
def exporter() -> Iterator[Exporter]:
    exp = Exporter(ExporterConfig(collectors=("gpu", "host"), sample_interval_s=0))
    yield exp
    exp.stop()


def test_real_gpu_scrape_and_manifest_make_sense(exporter: Exporter) -> None:
    exporter.tick()
    exporter.tick()
    text = exporter.metrics_text().decode()
    manifest = json.loads(exporter.manifest_json())
    assert scrape_problems(text, manifest) == []


def test_real_gpu_count_matches_nvml(exporter: Exporter) -> None:
    import pynvml

    pynvml.nvmlInit()
    try:
        count = pynvml.nvmlDeviceGetCount()
    finally:
        pynvml.nvmlShutdown()
    manifest = json.loads(exporter.manifest_json())
    assert len(manifest["gpus"]) == count
    text = exporter.metrics_text().decode()
    assert text.count("DCGM_FI_DEV_GPU_TEMP{") == count
