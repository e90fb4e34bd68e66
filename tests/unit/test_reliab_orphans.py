"""Issue 22 item 2: which hidden `.workers-*` folders are orphans (their coordinator gone, their run
never merged), and how a worker reads its coordinator's death."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from loadgen.scale.orphans import (
    COORDINATOR_FILE,
    NOT_REBUILT_FILE,
    coordinator_alive,
    note_coordinator,
    orphan_folders,
    process_start,
)

RUN = "20261201T000000Z-abcdef"


def _folder(root: Path, suffix: str, pid: int | None) -> Path:
    folder = root / f".workers-{RUN}{suffix}-k3j_x9q2"
    folder.mkdir(parents=True)
    if pid is not None:
        (folder / COORDINATOR_FILE).write_text(json.dumps({"pid": pid, "start": process_start(pid)}))
    return folder


def test_a_live_coordinator_is_known_by_pid_and_start_time(tmp_path: Path) -> None:
    note_coordinator(tmp_path)
    assert coordinator_alive(tmp_path)
    noted = json.loads((tmp_path / COORDINATOR_FILE).read_text())
    (tmp_path / COORDINATOR_FILE).write_text(json.dumps({**noted, "start": "1"}))  # a reused pid
    assert not coordinator_alive(tmp_path)


def test_orphans_are_folders_whose_coordinator_is_gone_and_run_not_merged(tmp_path: Path) -> None:
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    dead_pid = int(gone.stdout)
    live = _folder(tmp_path, "-live", os.getpid())
    orphan = _folder(tmp_path, "", dead_pid)
    assert orphan_folders(tmp_path) == [(RUN, orphan)]
    assert live.name.startswith(f".workers-{RUN}-live")
    (orphan / NOT_REBUILT_FILE).write_text("not one run\n")  # tried once: not again
    assert orphan_folders(tmp_path) == []
    (orphan / NOT_REBUILT_FILE).unlink()
    (tmp_path / RUN).mkdir()  # merged (or rebuilt) already
    assert orphan_folders(tmp_path) == []
