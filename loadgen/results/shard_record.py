"""Shard records read for a merge, and the checks that they make one run: every shard names the same
whole run (run id, count, whole-run fingerprints), no shard index twice, each shard's requests in its
own slice (k mod count == index) and none twice. Pure over plain values apart from `read_shard`."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadgen.results.manifest_schema import Manifest, ManifestError, read_manifest
from loadgen.results.rundir import RunNotFound, load_run
from loadgen.results.summary import read_lines, rebuild_summary

# what every shard of one run must agree on (manifest path -> what it names)
AGREE: tuple[tuple[Callable[[Manifest], Any], str], ...] = (
    (lambda m: m.run_id, "run id"),
    (lambda m: _shard_fact(m, "count"), "shard count"),
    (lambda m: _shard_fact(m, "run_num_requests"), "request count"),
    (lambda m: _shard_fact(m, "run_fingerprint"), "run fingerprint"),
    (lambda m: _shard_fact(m, "run_schedule_fingerprint"), "run schedule fingerprint"),
    (lambda m: m.workload.definition_fingerprint, "workload definition"),
)


def _shard_fact(m: Manifest, key: str) -> Any:
    return m.shard.raw.get(key) if m.shard else None


class MergeError(ValueError):
    """Shard records that do not make one run (one line naming the record and the fact)."""


@dataclass(frozen=True)
class ShardRecord:
    """One shard's run folder: manifest, summary (rebuilt when it crashed) and request lines."""

    path: Path
    manifest: dict[str, Any]
    summary: dict[str, Any]
    lines: list[dict[str, Any]]

    @property
    def typed(self) -> Manifest:
        """The manifest through the one schema (loadgen.results.manifest_schema)."""
        return read_manifest(self.manifest)

    @property
    def index(self) -> int:
        """This shard's index."""
        return int(self.shard["index"])

    @property
    def shard(self) -> dict[str, Any]:
        """The manifest's `shard` block."""
        found = self.typed.shard
        assert found is not None  # read_shard takes shard records only
        return dict(found.raw)


def read_shard(run_dir: str | Path) -> ShardRecord:
    """Read one shard's run folder (`results/<run_id>/`); MergeError when it is not a shard record.

    A finished shard whose summary.json is gone gets one rebuilt from its request lines, marked
    partial with that reason (its requests are merged, not lost)."""
    path = Path(run_dir)
    if not (path / "manifest.json").is_file():
        raise MergeError(f"{str(path)!r} holds no run record (no manifest.json)")
    summary_missing = not (path / "summary.json").is_file()
    try:
        record = load_run(path.parent, path.name)
    except (RunNotFound, FileNotFoundError):
        if not summary_missing:
            raise MergeError(f"{str(path)!r} holds no run record (manifest.json)") from None
        return _without_summary(path)
    except (json.JSONDecodeError, ManifestError, OSError) as exc:
        raise MergeError(f"{str(path)!r}: unreadable run record: {type(exc).__name__}: {exc}") from None
    if record.typed.shard is None:
        raise MergeError(f"{str(path)!r} is not a shard record (no `shard` in its manifest)")
    requests = record.requests_path
    lines = read_lines(requests.read_text()) if requests.is_file() else []
    return ShardRecord(path, record.manifest, record.summary, lines)


def _without_summary(path: Path) -> ShardRecord:
    """A shard record with a manifest and request lines but no summary.json: rebuilt, partial."""
    try:
        typed = read_manifest(path / "manifest.json")
    except ManifestError as exc:
        raise MergeError(f"{str(path)!r}: unreadable run record: {exc}") from None
    if typed.shard is None:
        raise MergeError(f"{str(path)!r} is not a shard record (no `shard` in its manifest)")
    manifest = dict(typed.raw)
    requests = path / "requests.jsonl"
    lines = read_lines(requests.read_text()) if requests.is_file() else []
    reason = f"summary.json missing (manifest status {typed.status!r}); rebuilt from requests.jsonl"
    summary = {**rebuild_summary(manifest, lines), "partial_reason": reason, "crashed": False}
    return ShardRecord(path, {**manifest, "partial": True, "partial_reason": reason}, summary, lines)


def check_one_run(shards: Sequence[ShardRecord]) -> None:
    """Raise MergeError unless the records are distinct shards of one run."""
    if not shards:
        raise MergeError("no shard records to merge")
    first = shards[0]
    for other in shards[1:]:
        for fact, what in AGREE:
            mine, theirs = fact(first.typed), fact(other.typed)
            if mine != theirs:
                raise MergeError(
                    f"{str(other.path)!r} has {what} {theirs!r}, "
                    f"{str(first.path)!r} has {mine!r}: not one run"
                )
    seen: dict[int, Path] = {}
    for shard in shards:
        if shard.index in seen:
            raise MergeError(
                f"shard {shard.index} given twice: {str(seen[shard.index])!r}, {str(shard.path)!r}"
            )
        seen[shard.index] = shard.path
    _check_slices(shards)


def _check_slices(shards: Sequence[ShardRecord]) -> None:
    """Each request line in its shard's slice, every index once over all shards."""
    count, total = int(shards[0].shard["count"]), int(shards[0].shard["run_num_requests"])
    owner: dict[int, int] = {}
    for shard in shards:
        for line in shard.lines:
            k = int(line["index"])
            if k % count != shard.index or not 0 <= k < total:
                raise MergeError(f"{str(shard.path)!r}: request {k} is not in shard {shard.index}'s slice")
            if k in owner:
                raise MergeError(f"request {k} appears twice (shards {owner[k]} and {shard.index})")
            owner[k] = shard.index


def shortfalls(shards: Sequence[ShardRecord]) -> dict[int, str]:
    """Shard index -> why it is not whole: missing, crashed, stopped early, or fewer requests sent."""
    count = int(shards[0].shard["count"])
    present = {s.index: s for s in shards}
    out: dict[int, str] = {}
    for index in range(count):
        shard = present.get(index)
        if shard is None:
            out[index] = "missing (no record given)"
            continue
        planned = int(shard.shard["slice_num_requests"])
        if shard.typed.partial:
            out[index] = f"partial: {shard.typed.partial_reason}"
        elif len(shard.lines) < _counted(shard):
            out[index] = (
                f"requests.jsonl holds {len(shard.lines)} of the {_counted(shard)} requests its summary "
                "counts (the file was cut)"
            )
        elif len(shard.lines) < planned:
            out[index] = f"sent {len(shard.lines)} of its {planned} requests"
    return out


def _counted(shard: ShardRecord) -> int:
    """Requests the shard's own summary says it recorded (0 when it does not say)."""
    requests = shard.summary.get("requests")
    total = requests.get("total") if isinstance(requests, dict) else None
    return int(total) if isinstance(total, int) else 0
