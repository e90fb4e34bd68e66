"""What a plain raw-client run keeps off its start-up and hot path: aiohttp, prometheus_client and
yaml are not imported by the run path, token ids are drawn as `random.choices` draws them, and the
backlog's size estimate is unchanged."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest

from loadgen.records import RequestRecord
from loadgen.run.backlog import PIECE_OVERHEAD, held_bytes
from loadgen.run.unserved_metrics import UnservedMetrics
from loadgen.workload.generator import TOKEN_ID_HIGH, TOKEN_ID_LOW, _token_ids

REPO = Path(__file__).resolve().parents[2]
RUN_PATH = ["loadgen.cli.main", "loadgen.cli.run", "loadgen.run.runner", "loadgen.run.steps"]


@pytest.mark.parametrize("blocked", ["aiohttp", "prometheus_client", "yaml"])
def test_the_run_path_imports_without(blocked: str) -> None:
    code = f"import sys; sys.modules[{blocked!r}] = None\n" + "".join(f"import {m}\n" for m in RUN_PATH)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert done.returncode == 0, done.stderr


def test_a_blocked_import_on_the_run_path_is_caught() -> None:  # the check above can fail
    code = "import sys; sys.modules['aiohttp'] = None\nimport loadgen.transport.stamping\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert done.returncode != 0
    assert "aiohttp" in done.stderr


@pytest.mark.parametrize("n", [0, 1, 32, 4096])
def test_token_ids_are_the_draws_of_random_choices(n: int) -> None:
    population = range(TOKEN_ID_LOW, TOKEN_ID_HIGH + 1)
    for seed in ("1:req:0", "1:req:7", "42:req:123456"):
        assert _token_ids(random.Random(seed), n) == random.Random(seed).choices(population, k=n)


def test_held_bytes_is_payload_plus_overhead_per_read() -> None:
    reads = [(1, b"abc"), (2, b""), (3, b"0123456789")]
    assert held_bytes(reads) == 13 + 3 * PIECE_OVERHEAD  # 3 + 0 + 10 payload bytes, 3 pieces
    assert held_bytes(None) == held_bytes([]) == 0


def test_unserved_metrics_take_every_call_and_say_they_are_not_served() -> None:
    metrics = UnservedMetrics()
    record = RequestRecord(0, "r0", False, 0, 32, 32, outcome="ok")
    metrics.observe_sent(record, 5)
    metrics.observe(record, True)
    for gauge in (metrics.in_flight, metrics.loop_lag, metrics.unparsed_backlog, metrics.end_ts):
        gauge.set(1.0)
    metrics.stop()
    assert metrics.address is None  # Run.account and the dispatcher's on_sent key off this
