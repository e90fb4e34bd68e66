"""Shared test fixtures: paths to the golden captures from real engines."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
FIXTURES = REPO_ROOT / "tests" / "fixtures"
GOLDEN = FIXTURES / "golden"  # copied from shared/golden: vLLM 0.26.0 and SGLang 0.5.14 on an H200
GOLDEN_VLLM = GOLDEN / "vllm-0.26.0"
GOLDEN_SGLANG = GOLDEN / "sglang-0.5.14"
GOLDEN_LLAMACPP = GOLDEN / "llamacpp-b1-0c1e570"  # a real llama-server built here on a CPU
GOLDEN_SSE_STREAMS = [  # the streaming captures of both engines (bytes + .timing.jsonl)
    d / f"sse_{n}.txt"
    for d in (GOLDEN_VLLM, GOLDEN_SGLANG)
    for n in ("completions", "chat", "completions_ignore_eos", "completions_continuous_usage")
]


@pytest.fixture
def golden_vllm() -> Path:
    return GOLDEN_VLLM


@pytest.fixture
def golden_sglang() -> Path:
    return GOLDEN_SGLANG


# No test may see what else runs on the host (issue #22 item 21): an exporter a user left on the
# default 127.0.0.1:9402 discovers the tests' simulated engines by their processes and would be
# attached to their runs. Subprocesses attach none (LOADGEN_EXPORTER_URL=none); in-process runs try
# a closed loopback port instead of the default, which is the "no exporter here" path users see.
os.environ.setdefault("LOADGEN_EXPORTER_URL", "none")


@pytest.fixture(autouse=True)
def _no_host_exporter(monkeypatch: pytest.MonkeyPatch) -> None:
    from loadgen.targets import exporter_client
    from tests.loadgen_servers import free_port  # a loopback port nobody listens on

    monkeypatch.setattr(exporter_client, "EXPORTER_DEFAULT", f"http://127.0.0.1:{free_port()}")


@pytest.fixture(scope="module")
def kernel_stamping_on() -> Iterator[None]:
    """Hold a socket with SO_TIMESTAMPNS for the module. Linux stamps received packets only while
    some socket asks for stamps, and the first one to ask turns stamping on from a deferred work
    item: a test whose connection is the host's only stamped socket can read its first bytes before
    that runs, unstamped (`arrival_stamps` then says `mixed`). A run preconnects ahead of its first
    send; a test of one request does not."""
    import time

    from loadgen.transport.kernel_stamps import hold_stamping

    keeper = hold_stamping()
    try:
        time.sleep(0.05)  # the deferred work item runs
        yield
    finally:
        if keeper is not None:
            keeper.close()
