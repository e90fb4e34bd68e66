"""The listen-address options: the exporter and loadgen's live /metrics bind where they are told.

What each binds is read from the kernel (psutil: the listening socket's own address), not from a log.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
from click.testing import CliRunner

from loadgen.cli.run import build_config
from loadgen.config import ConfigError, RunConfig
from loadgen.run.runner import run_benchmark
from tests.loadgen_servers import FakeEngine, free_port, serve

ADDRESSES = ("127.0.0.1", "0.0.0.0")


def listening(proc: psutil.Process, port: int) -> set[str]:
    """The addresses `proc` listens on at `port`."""
    return {
        c.laddr.ip
        for c in proc.net_connections(kind="tcp")
        if c.status == psutil.CONN_LISTEN and c.laddr.port == port
    }


def wait_listening(proc: psutil.Process, port: int, timeout_s: float = 20) -> set[str]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = listening(proc, port)
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"nothing listened on port {port} within {timeout_s} s")


@pytest.mark.parametrize("addr", ADDRESSES)
def test_exporter_binds_the_listen_address(addr: str) -> None:
    port = free_port()
    argv = ["--listen-address", addr, "--port", str(port), "--no-discover", "--fake-gpus", "1"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "exporter", *argv, "--log-level", "warning"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert wait_listening(psutil.Process(proc.pid), port) == {addr}
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_exporter_keeps_its_old_host_flag_and_names_a_bad_address() -> None:
    from exporter.cli import main

    bad = CliRunner().invoke(main, ["--host", "no such host.invalid", "--once", "metrics"])
    assert bad.exit_code == 2
    assert "'no such host.invalid' is not an address of this host" in bad.output


def _config(base_url: str, tmp_path: Path, **kw: Any) -> RunConfig:
    return RunConfig(
        target="openai",
        base_url=base_url,
        results_dir=str(tmp_path),
        input_len="fixed:16",
        output_len="fixed:8",
        **kw,
    )


@pytest.mark.parametrize("addr", ADDRESSES)
async def test_loadgen_metrics_bind_the_listen_address(tmp_path: Path, addr: str) -> None:
    engine = FakeEngine(ttft_s=0.005, itl_s=0.001)
    port = free_port()
    async with serve(engine.app()) as url:
        config = _config(
            url,
            tmp_path,
            num_prompts=20,
            rate=20.0,
            metrics_port=port,
            metrics_listen_address=addr,
            linger_s=1.0,
        )
        task = asyncio.create_task(run_benchmark(config, progress=False))
        found = await asyncio.to_thread(wait_listening, psutil.Process(), port)
        await task
    assert found == {addr}


def test_loadgen_flag_reaches_the_config() -> None:
    params = {"config": None, "metrics_listen_address": "0.0.0.0", "target": "openai"}
    params["base_url"] = "http://127.0.0.1:8000"
    config = build_config(params, [], {})
    assert config.metrics_listen_address == "0.0.0.0"
    assert RunConfig(target="openai", base_url="http://127.0.0.1:8000").metrics_listen_address == "127.0.0.1"


async def test_loadgen_names_a_bad_listen_address(tmp_path: Path) -> None:
    async with serve(FakeEngine(ttft_s=0.005, itl_s=0.001).app()) as url:
        config = _config(
            url, tmp_path, num_prompts=1, metrics_port=free_port(), metrics_listen_address="bad host!"
        )
        with pytest.raises(
            ConfigError, match="cannot serve metrics on bad host! port .*bad listen address 'bad host!'"
        ):
            await run_benchmark(config, progress=False)
