"""What a plain raw-client run keeps off its start-up and hot path: aiohttp, prometheus_client and
yaml are not imported by the run path, nor (in a whole run) what only an orphaned --workers run,
a JSONL dataset or a worker needs; git is asked for the commit once a process (one run, and no
`uname -p` for the platform), a run without Grafana starts no thread to annotate nothing; token
ids are drawn as `random.choices` draws them, and the backlog's size estimate is unchanged."""

from __future__ import annotations

import json
import platform
import random
import subprocess
import sys
from pathlib import Path

import pytest

from loadgen import provenance
from loadgen.records import RequestRecord
from loadgen.results.manifest import host_platform, tool_info
from loadgen.run.backlog import PIECE_OVERHEAD, held_bytes
from loadgen.run.unserved_metrics import UnservedMetrics
from loadgen.workload.generator import TOKEN_ID_HIGH, TOKEN_ID_LOW, _token_ids

REPO = Path(__file__).resolve().parents[2]
RUN_PATH = ["loadgen.cli.main", "loadgen.cli.run", "loadgen.run.runner", "loadgen.run.steps"]
# what a whole plain run (raw client, no --metrics-port, no Grafana, quiet) must not import
OFF_A_PLAIN_RUN = [
    "aiohttp",
    "prometheus_client",
    "yaml",
    "rich",
    "numpy",
    "ctypes",  # a --workers worker's parent-death signal
    "loadgen.results.merge",  # an orphaned --workers run's rebuild
    "loadgen.results.shard_record",
    "loadgen.workload.dataset",  # --workload jsonl
    "loadgen.run.live_metrics",
]
WHOLE_RUN = """\
import asyncio, json, sys
threads = []
to_thread = asyncio.to_thread
def counted(fn, *args, **kwargs):
    threads.append(getattr(fn, "__name__", "?"))
    return to_thread(fn, *args, **kwargs)
asyncio.to_thread = counted
spawned = []
def audit(event, args):  # every process the run starts (the `subprocess.Popen` audit event)
    if event == "subprocess.Popen":
        cmd = args[1]
        spawned.append([str(a) for a in cmd] if isinstance(cmd, (list, tuple)) else [str(cmd)])
sys.addaudithook(audit)
import os
real_exit = os._exit
def report(status):  # the console script ends with os._exit (loadgen.cli.console.leave)
    off = [m for m in OFF if m in sys.modules]
    print(json.dumps({"imported": off, "to_thread": threads, "spawned": spawned}), file=sys.stderr)
    sys.stderr.flush()
    real_exit(status)
os._exit = report
from loadgen.cli.console import console
sys.argv = ["loadgen", *ARGS]
console()
"""


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


@pytest.mark.timeout(60)
def test_a_whole_plain_run_imports_nothing_it_does_not_use(tmp_path: Path) -> None:
    from tests.loadgen_servers import FakeEngine, ServerThread, plain_run_args

    engine = FakeEngine(ttft_s=0.001, itl_s=0.001)
    with ServerThread(engine.app) as server:
        args = plain_run_args(server.base_url, tmp_path, 3, 50, 4)
        code = WHOLE_RUN.replace("ARGS", repr(args)).replace("OFF", repr(OFF_A_PLAIN_RUN))
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=50
        )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["requests"]["ok"] == 3
    seen = json.loads(done.stderr.strip().splitlines()[-1])
    assert seen["imported"] == []
    assert seen["to_thread"] == []  # no Grafana: no annotation thread
    # one process started: git, for the commit (not `uname -p` for the platform, nor git twice)
    assert [cmd[:2] for cmd in seen["spawned"]] == [["git", "rev-parse"]]


def test_the_platform_text_is_platform_platform_without_its_uname_run() -> None:
    uname = platform.uname()
    if uname.system != "Linux" or uname.processor not in ("", uname.machine):
        pytest.skip(f"platform() keeps this host's processor field {uname.processor!r}")
    assert host_platform() == platform.platform()


def test_the_commit_is_asked_of_git_once_a_process(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[int] = []

    def checkout_sha() -> str:
        asked.append(1)
        return "abc123"

    monkeypatch.setattr(provenance, "checkout_sha", checkout_sha)
    provenance.git_sha.cache_clear()
    try:
        first, second = tool_info(), tool_info()  # a run's start manifest and its final one
    finally:
        provenance.git_sha.cache_clear()  # the next caller asks the real checkout again
    assert first == second
    assert first["git_sha"] == "abc123"
    assert len(asked) == 1
