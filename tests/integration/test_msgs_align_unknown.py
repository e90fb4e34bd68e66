"""Issue 22 item 12: `align --check` warned `max_num_seqs is 'auto'` for a vLLM started with
`--max-num-seqs 64`. Without an exporter the value is unknown (said so, not compared); with an
exporter on its host (which reads the launch line) it is the 64 the engine runs with.

A real simulated vLLM runs as its own process (outside dev mode: no /server_info), and a real
exporter app on loopback discovers it from the process table, as on a GPU host.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator

import pytest
from aiohttp.test_utils import TestServer
from click.testing import CliRunner

from exporter.app import Exporter, ExporterConfig, build_app
from loadgen.cli.align import align
from simengine.embedded import EmbeddedEngine
from tests.integration.test_engines_align_check import _rows
from tests.loadgen_servers import free_port

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def vllm_64() -> Iterator[str]:
    port = free_port()
    argv = [sys.executable, "-m", "simengine", "--personality", "vllm", "--max-num-seqs", "64"]
    proc = subprocess.Popen([*argv, "--host", "127.0.0.1", "--port", str(port)], stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"{url}/health", timeout=1).close()  # noqa: S310 - loopback
            break
        except OSError:
            time.sleep(0.1)
    try:
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture
async def exporter_url() -> AsyncIterator[str]:
    exporter = Exporter(ExporterConfig(collectors=("engine",), discover=True))
    server = TestServer(build_app(exporter, None), host="127.0.0.1", port=0)
    await server.start_server()
    try:
        yield f"http://127.0.0.1:{server.port}"
    finally:
        await server.close()


async def test_msgs_align_unknown_max_num_seqs_without_exporter_and_64_with_it(
    vllm_64: str, exporter_url: str
) -> None:
    with EmbeddedEngine(["--personality", "sglang", "--max-running-requests", "64"]) as sglang:
        bare = await asyncio.to_thread(CliRunner().invoke, align, ["--check", vllm_64, sglang.base_url])
        args = ["--check", vllm_64, sglang.base_url, "--exporter-a", exporter_url]
        seen = await asyncio.to_thread(CliRunner().invoke, align, args)
    assert "max_num_seqs is 'auto'" not in bare.output, bare.output  # before: this warning
    assert "warning: A does not say " in bare.output
    assert "max_num_seqs" in next(
        x for x in bare.output.splitlines() if x.startswith("warning: A does not say")
    )
    assert "max_num_seqs" not in _rows(bare.output)  # unknown is no difference
    assert f"A: {vllm_64} (vllm " in seen.output, seen.output
    assert "from exporter " in seen.output, seen.output
    assert "max_num_seqs is 'auto'" not in seen.output
    assert "does not say max_num_seqs" not in seen.output
    assert "max_num_seqs" not in _rows(seen.output)  # 64 on both: aligned
