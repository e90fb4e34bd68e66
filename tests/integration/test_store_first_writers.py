"""A new SQLite store opened by several processes at once (the shards of one run finishing together):
each one connects. Switching a new database to WAL meets the other processes' lock, and SQLite answers
that with "database is locked" at once, without the busy timeout; the driver retries it (a shard lost
its store row to it: tests/integration/test_deploy_shard_store.py)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(120)
PROCESSES = 4
ROUNDS = 3

OPEN = """
import sys, time
from loadgen.store.db import open_store
from loadgen.store.url import parse_store
url = parse_store("sqlite:///" + sys.argv[1], ".")
while time.time() < float(sys.argv[2]):  # every process opens the store at the same moment
    pass
with open_store(url) as store:
    store.conn.execute("SELECT 1")
print("opened")
"""


def test_processes_opening_a_new_store_at_once_all_connect(tmp_path: Path) -> None:
    for round_ in range(ROUNDS):
        path = tmp_path / f"round-{round_}" / "runs.db"
        start = time.time() + 0.5 + 0.25 * PROCESSES  # after every interpreter is up, busy machine or not
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", OPEN, str(path), str(start)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(PROCESSES)
        ]
        for proc in procs:
            out, err = proc.communicate(timeout=60)
            assert proc.returncode == 0, err
            assert out.strip() == "opened"
