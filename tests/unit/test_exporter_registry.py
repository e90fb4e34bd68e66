"""The collector name -> factory map: names, unknown names, and a manifest that only asks collectors."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from exporter.app import Exporter, ExporterConfig
from exporter.cli import main
from exporter.collectors.registry import COLLECTORS, FACTORIES, UnknownCollector
from exporter.nvml.fake import FakeNvml
from exporter.nvml.session import NvmlSession


def test_collectors_are_the_factory_map() -> None:
    assert tuple(FACTORIES) == COLLECTORS
    exporter = Exporter(
        ExporterConfig(collectors=("host", "gpu"), discover=False, sample_interval_s=0),
        session=NvmlSession(FakeNvml(1)),
    )
    assert list(exporter.collectors) == ["gpu", "host"]  # built in the map's (manifest) order


def test_unknown_collector_names_the_valid_ones() -> None:
    with pytest.raises(UnknownCollector, match=r"unknown collector 'disk'; choose from gpu, engine, host"):
        Exporter(ExporterConfig(collectors=("gpu", "disk")))


@pytest.mark.parametrize("flag", ["--collector", "--no-collector"])
def test_unknown_collector_flag_exits_2_listing_the_valid_ones(flag: str) -> None:
    result = CliRunner().invoke(main, [flag, "disk", "--once", "metrics"])
    assert result.exit_code == 2
    assert "'disk' is not one of 'gpu', 'engine', 'host'" in result.output


def test_manifest_asks_collectors_so_without_the_gpu_collector_nvml_is_never_touched() -> None:
    nvml = FakeNvml(2)
    exporter = Exporter(
        ExporterConfig(collectors=("engine", "host"), discover=False), session=NvmlSession(nvml)
    )
    manifest = json.loads(exporter.manifest_json())
    assert manifest["gpus"] == []
    assert manifest["host"]["hostname"]
    assert nvml.calls == 0
    with_gpu = Exporter(ExporterConfig(collectors=("gpu",), sample_interval_s=0), session=NvmlSession(nvml))
    assert [gpu["index"] for gpu in json.loads(with_gpu.manifest_json())["gpus"]] == [0, 1]
    assert nvml.calls > 0
