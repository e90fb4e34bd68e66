"""`infergauge-exporter` command line: env twins, --once, and one-line errors with exit code 2."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from exporter.cli import main


def invoke(args: list[str], env: dict[str, str] | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(main, args, env=env, catch_exceptions=False)
    return result.exit_code, result.output


def test_once_metrics_with_fake_gpus() -> None:
    code, out = invoke(["--once", "metrics", "--fake-gpus", "2", "--no-discover", "--no-collector", "engine"])
    assert code == 0
    assert out.count("DCGM_FI_DEV_GPU_UTIL{") == 2
    assert 'modelName="NVIDIA H200 (fake)"' in out
    assert 'collector="engine"' not in out


def test_once_metrics_with_a_hung_fake_gpu_returns_and_marks_it() -> None:
    started = time.perf_counter()
    code, out = invoke(
        ["--once", "metrics", "--fake-gpus", "2", "--fake-hung-gpu", "1", "--nvml-timeout", "0.2"]
        + ["--no-collector", "engine"]
    )
    assert time.perf_counter() - started < 3  # without deadlines this never returns
    assert code == 0
    assert out.count("DCGM_FI_DEV_GPU_UTIL{") == 1
    assert 'infergauge_gpu_read_success{Hostname="' in out
    assert 'gpu="1"} 0.0' in out.split("infergauge_gpu_read_success")[-1].split("# HELP")[0]
    assert 'infergauge_collector_success{collector="gpu"} 0.0' in out


def test_environment_twins() -> None:
    env = {"INFERGAUGE_EXPORTER_COLLECTOR": "host", "INFERGAUGE_EXPORTER_ONCE": "metrics"}
    code, out = invoke([], env)
    assert code == 0
    assert 'infergauge_collector_success{collector="host"} 1.0' in out
    assert 'collector="gpu"' not in out
    # a flag beats its environment twin
    code, out = invoke(["--collector", "gpu", "--fake-gpus", "1"], env)
    assert code == 0
    assert 'infergauge_collector_success{collector="gpu"} 1.0' in out


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--collector", "disk"], "'disk' is not one of 'gpu', 'engine', 'host'"),
        (["--engine-url", "localhost:8000"], "'localhost:8000' is not an http(s) URL"),
        (["--sample-interval", "-1"], "-1"),
        (["--port", "70000"], "70000"),
        (["--fake-gpus", "2", "--fake-hung-gpu", "5"], "5 is not one of the 2 fake GPUs"),
        (["--nvml-timeout", "0"], "0"),
    ],
)
def test_bad_input_exits_2_naming_the_value(args: list[str], needle: str) -> None:
    code, out = invoke([*args, "--once", "metrics"])
    assert code == 2
    assert needle in out


def test_bad_web_config_exits_2(tmp_path: Path) -> None:
    config = tmp_path / "web.yml"
    config.write_text("basic_auth_users:\n  prom: not-a-hash\n")
    code, out = invoke(["--web-config-file", str(config), "--once", "metrics"])
    assert code == 2
    assert "not a bcrypt hash" in out
