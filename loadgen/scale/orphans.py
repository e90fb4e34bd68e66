"""A `--workers` run whose coordinator died (kill -9, the OOM killer) before it merged the workers'
records: the workers die with it (`die_with_parent`), and the next `loadgen run` or `loadgen store
import` finds its hidden `.workers-<run_id>-*` folder and rebuilds the run from what the workers
wrote (their records, or their journals when they were killed too), marked crashed and partial.

The coordinator writes `coordinator.json` (its pid and its process start time) into the folder
when it starts; a folder whose coordinator still runs, or whose run was already merged, is left
alone."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

COORDINATOR_FILE = "coordinator.json"
NOT_REBUILT_FILE = "not-rebuilt.txt"  # why the records found could not be merged (tried once)
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
PARENT_POLL_S = 0.5  # the fallback check of the worker's parent (where prctl is not there)


def process_start(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22), None if gone:
    with the pid it names one process, even after the pid is reused."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def note_coordinator(folder: Path) -> None:
    """Write who coordinates the run into its hidden folder (read by `recover_orphans`)."""
    pid = os.getpid()
    (folder / COORDINATOR_FILE).write_text(json.dumps({"pid": pid, "start": process_start(pid)}) + "\n")


def coordinator_alive(folder: Path) -> bool:
    """True while the process that wrote the folder's coordinator.json still runs."""
    try:
        noted = json.loads((folder / COORDINATOR_FILE).read_text())
    except (OSError, ValueError):
        return False
    start = process_start(int(noted["pid"]))
    return start is not None and start == noted.get("start")


def die_with_parent(parent: int) -> None:
    """In a worker: SIGTERM when the coordinator dies (each worker then stops and writes its partial
    record): Linux's parent-death signal, and a thread watching the parent pid as the fallback."""
    import ctypes  # a worker's only (~2 ms of import off every plain run's start)

    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_S)
        os.kill(os.getpid(), signal.SIGTERM)

    if os.getppid() != parent:  # died before the signal was armed
        os.kill(os.getpid(), signal.SIGTERM)
    threading.Thread(target=watch, name="loadgen-parent-watch", daemon=True).start()


def orphan_folders(results_dir: str | Path) -> list[tuple[str, Path]]:
    """(run id, folder) of each `.workers-*` folder whose coordinator is gone and run not merged."""
    root = Path(results_dir)
    if not root.is_dir():
        return []
    out = []
    for folder in sorted(root.glob(".workers-*")):
        run_id = folder.name[len(".workers-") :].rsplit("-", 1)[0]
        if (folder / NOT_REBUILT_FILE).exists() or (root / run_id).exists():
            continue
        if folder.is_dir() and not coordinator_alive(folder):
            out.append((run_id, folder))
    return out


def recover_orphans(results_dir: str | Path, rebuilt: list[str] | None = None) -> list[str]:
    """Rebuild every orphaned `--workers` run under results_dir (see module docstring); returns one
    line per run rebuilt or left unreadable (and appends each rebuilt run id to `rebuilt`)."""
    said = []
    for run_id, folder in orphan_folders(results_dir):
        # imported only when there is an orphan to rebuild: every plain run looks for one first
        from loadgen.results.merge import merge, write_merged
        from loadgen.results.shard_record import MergeError, read_shard

        shards = []
        for shard_dir in sorted(folder.glob(f"shard-*/{run_id}")):
            with contextlib.suppress(MergeError):
                shards.append(read_shard(shard_dir))
        if not shards:
            continue
        try:
            merged = merge(shards)
        except MergeError as exc:
            said.append(f"warning: {folder}: not rebuilt ({exc})")
            (folder / NOT_REBUILT_FILE).write_text(f"{exc}\n")  # said once, not on every later run
            continue
        mark_crashed(merged.manifest, merged.summary, folder)
        if isinstance(merged.manifest.get("config"), dict):  # the run's folder, not worker 0's
            merged.manifest["config"]["results_dir"] = str(results_dir)
        write_merged(results_dir, merged, [s.path for s in shards])
        if rebuilt is not None:
            rebuilt.append(run_id)
        n = len(merged.records)
        said.append(f"warning: rebuilt run {run_id} (its --workers coordinator died): crashed, {n} requests")
    return said


def mark_crashed(manifest: dict[str, Any], summary: dict[str, Any], folder: Path) -> None:
    """The merged record says the run crashed: the coordinator died before it merged."""
    try:
        pid = json.loads((folder / COORDINATOR_FILE).read_text()).get("pid")
    except (OSError, ValueError):
        pid = None
    why = f"crashed: the --workers coordinator (pid {pid}) died before merging the workers' records"
    reason = summary.get("partial_reason")
    reason = f"{why}; {reason}" if reason else why
    for doc in (manifest, summary):
        doc.update(partial=True, crashed=True, partial_reason=reason)
    manifest["status"] = "crashed"


def recover_and_say(results_dir: str | Path) -> list[str]:
    """`recover_orphans`, each line on stderr (never failing the command that called it); returns
    the run ids rebuilt."""
    rebuilt: list[str] = []
    try:
        lines = recover_orphans(results_dir, rebuilt)
    except OSError as exc:
        lines = [f"warning: orphaned --workers runs under {results_dir} not rebuilt: {exc.strerror or exc}"]
    for line in lines:
        print(line, file=sys.stderr)
    return rebuilt
