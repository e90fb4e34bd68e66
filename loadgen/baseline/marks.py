"""Noisy runs marked in the store: the check writes each run's `noisy` mark (why its own record says it
was unreliable, loadgen.baseline.noisy, with the suite's bounds), says which runs it left out, and the
scheduler re-runs a series whose newest run is noisy (loadgen.baseline.cycle)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from loadgen.analysis.changepoint import DetectorSettings
from loadgen.baseline.check import noisy_runs
from loadgen.baseline.history import StoredRun, read_history
from loadgen.store import schema
from loadgen.store.db import Store, open_store
from loadgen.store.url import StoreURL

History = Mapping[tuple[str, str], Sequence[StoredRun]]


def marks(
    history: History, settings: Mapping[str, DetectorSettings]
) -> dict[tuple[str, str], dict[str, str]]:
    """(suite, series key) -> run id -> its noisy reasons ("; "-joined), for the noisy runs; `settings`
    are each suite's (the bounds of what is noisy)."""
    return {
        key: {run_id: "; ".join(why) for run_id, why in noisy_runs(runs, settings[key[0]]).items()}
        for key, runs in history.items()
    }


def write_marks(store: Store, found: Mapping[tuple[str, str], Mapping[str, str]]) -> int:
    """Bring the `noisy` column of the checked series' runs up to date (marks set, stale ones cleared)
    in one transaction; returns how many rows changed."""
    changed = 0
    with store.transaction():
        for (_, series_key), now in found.items():
            rows = store.conn.execute(
                schema.select_noisy(store.dialect), {"series_key": series_key}
            ).fetchall()
            stored = {str(run_id): str(why) for run_id, why in rows}
            updates: dict[str, str | None] = {r: w for r, w in now.items() if stored.get(r) != w}
            updates.update({r: None for r in stored if r not in now})
            for run_id, why in updates.items():
                store.conn.execute(schema.mark_noisy(store.dialect), {"run_id": run_id, "noisy": why})
            changed += len(updates)
    return changed


def stored_marks(store: Store, series_key: str) -> dict[str, str]:
    """run id -> noisy reasons of one series' marked runs, as the store keeps them."""
    rows = store.conn.execute(schema.select_noisy(store.dialect), {"series_key": series_key}).fetchall()
    return {str(run_id): str(why) for run_id, why in rows}


def left_out(url: StoreURL, suite: str | None, series: str | None = None) -> list[str]:
    """What the check says of the noisy runs it left out, one line per run, from the store's marks."""
    lines = []
    with open_store(url) as store:
        history = read_history(store, suite)
        for key in sorted(history):
            if series is None or key[1].split("@", 1)[0] == f"{key[0]}/{series}":
                for run_id, why in stored_marks(store, key[1]).items():
                    lines.append(f"left out of the check: noisy run {run_id} of {key[1]} ({why})")
    return lines


def noisy_newest(url: StoreURL, suite: str) -> dict[str, str]:
    """Series name (as in the suite) -> why its newest ok run is marked noisy, for those it is."""
    out = {}
    with open_store(url) as store:
        for (_, key), runs in read_history(store, suite).items():
            ok = [r for r in runs if r.status == "ok"]
            why = stored_marks(store, key).get(ok[-1].run_id) if ok else None
            if why is not None:
                out[key.split("@", 1)[0].split("/", 1)[1]] = why
    return out
