"""`loadgen store import`: every run folder of a results dir into the store, idempotently."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from loadgen.results.rundir import RunNotFound, load_run
from loadgen.store.db import Store
from loadgen.store.rows import build_row

RECORD_FILES = ("manifest.json", "summary.json", "requests.jsonl")
KINDS = ("new", "updated", "skipped", "unreadable")


@dataclass
class ImportReport:
    """How many folders were new, updated, skipped (unchanged) or unreadable, with the reasons."""

    counts: Counter[str] = field(default_factory=Counter)
    unreadable: dict[str, str] = field(default_factory=dict)

    def line(self) -> str:
        """`3 new, 0 updated, 2 skipped, 1 unreadable`."""
        return ", ".join(f"{self.counts[k]} {k}" for k in KINDS)


def run_folders(results_dir: str | Path) -> list[str]:
    """Folders directly under the results dir that hold any part of a run record, by name."""
    root = Path(results_dir)
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if any((p / f).is_file() for f in RECORD_FILES))


def import_runs(store: Store, results_dir: str | Path) -> ImportReport:
    """Upsert every run folder's row (each its own transaction); unreadable folders are counted."""
    report = ImportReport()
    for run_id in run_folders(results_dir):
        try:
            record = load_run(results_dir, run_id)
            row = build_row(record.manifest, record.summary)
        except (RunNotFound, ValueError, OSError) as exc:  # JSONDecodeError is a ValueError
            report.counts["unreadable"] += 1
            report.unreadable[run_id] = _why(exc)
            continue
        report.counts[store.put(row)] += 1
    return report


def _why(exc: Exception) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return f"invalid JSON: {exc}"
    return str(exc) or type(exc).__name__
