"""The run manifest's one schema: typed, frozen views of the parts readers use (identity, tool,
client, config, workload, engine, exporter, cache, experiment, shard; defined in manifest_views and
re-exported here), a `manifest_version`, and ONE reader, `read_manifest`, that upgrades older
records on read (docs/run-record.md).

Versions: 1 = records written before the field existed (no `manifest_version`, no `status`, no
`engine.param_sources`); 2 = today's (`manifest_version: 2` written first in every new record).
A record of a newer version than this loadgen knows, or one that is no JSON object, is a one-line
`ManifestError` naming the file."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from loadgen.results.manifest_views import (
    SERVED,
    Cache,
    Client,
    EngineBlock,
    Experiment,
    Exporter,
    ExporterEngine,
    Manifest,
    Shard,
    Tool,
    Workload,
    as_dict,
    as_bool,
    as_int,
    as_text,
)

__all__ = [
    "MANIFEST_VERSION",
    "SERVED",
    "Cache",
    "Client",
    "EngineBlock",
    "Experiment",
    "Exporter",
    "ExporterEngine",
    "Manifest",
    "ManifestError",
    "Shard",
    "Tool",
    "Workload",
    "as_dict",
    "read_manifest",
    "upgrade",
]

MANIFEST_VERSION = 2
SECTIONS = ("tool", "client", "config", "workload", "engine", "exporter", "cache")


class ManifestError(ValueError):
    """A file or value that is no run manifest this loadgen can read (one line, names the file)."""


def _v1_to_v2(raw: dict[str, Any]) -> dict[str, Any]:
    """v1 (no version field) -> v2: a finished record's `status` (v1 wrote a record only when the run
    ended) and the engine block's `param_sources` (v1 resolved no sources)."""
    out = {**raw, "manifest_version": 2}
    out.setdefault("status", "crashed" if raw.get("crashed") else "complete")
    if isinstance(raw.get("engine"), Mapping):
        out["engine"] = {**raw["engine"], "param_sources": raw["engine"].get("param_sources") or {}}
    return out


UPGRADES: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {1: _v1_to_v2}


def upgrade(raw: Mapping[str, Any], where: str = "manifest") -> dict[str, Any]:
    """The record upgraded step by step to MANIFEST_VERSION (no `manifest_version` = 1)."""
    version = raw.get("manifest_version", 1)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ManifestError(f"{where}: manifest_version {version!r} is not a version (1..{MANIFEST_VERSION})")
    if version > MANIFEST_VERSION:
        raise ManifestError(
            f"{where}: manifest_version {version} is newer than this loadgen reads "
            f"(<= {MANIFEST_VERSION}): upgrade loadgen"
        )
    out = dict(raw)
    while version < MANIFEST_VERSION:
        out = UPGRADES[version](out)
        version += 1
    for key in SECTIONS:
        if out.get(key) is not None and not isinstance(out[key], Mapping):
            raise ManifestError(f"{where}: `{key}` is a {type(out[key]).__name__}, not an object")
    return out


def _exporter(raw: Any) -> Exporter:
    section = as_dict(raw)
    listed = section.get("engines")
    engines = tuple(
        ExporterEngine(
            as_text(e.get("engine")),
            as_text(e.get("version")),
            as_text(e.get("model")),
            as_text(e.get("url")),
            as_int(e.get("pid")),
            as_dict(e.get("params")),
            e,
        )
        for e in (listed if isinstance(listed, list) else [])
        if isinstance(e, Mapping)
    )
    gpus, checks = section.get("gpus"), section.get("checks")
    return Exporter(
        bool(section),
        as_dict(section.get("host")),
        tuple(g for g in gpus if isinstance(g, Mapping)) if isinstance(gpus, list) else (),
        engines,
        tuple(c for c in checks if isinstance(c, Mapping)) if isinstance(checks, list) else (),
    )


def _engine(raw: Any) -> EngineBlock:
    e = as_dict(raw)
    return EngineBlock(
        as_text(e.get("engine")),
        as_text(e.get("target_preset")),
        as_text(e.get("version")),
        as_text(e.get("model")),
        as_int(e.get("max_model_len")),
        as_text(e.get("base_url")),
        as_dict(e.get("params")),
        as_dict(e.get("param_sources")),
        as_dict(e.get("server_args")),
    )


def _experiment(raw: Any) -> Experiment | None:
    if not isinstance(raw, Mapping) or not raw:
        return None
    slo = raw.get("slo")
    return Experiment(
        as_text(raw.get("phase")),
        as_text(raw.get("variant")),
        as_text(raw.get("engine")),
        as_text(raw.get("workload")),
        tuple(slo) if isinstance(slo, list) else (),
        raw,
    )


def _shard(raw: Any) -> Shard | None:
    if not isinstance(raw, Mapping) or as_int(raw.get("index")) is None:
        return None
    return Shard(int(raw["index"]), as_int(raw.get("count")), raw)


def _typed(raw: Mapping[str, Any]) -> Manifest:
    tool, client, wl, cache = (as_dict(raw.get(k)) for k in ("tool", "client", "workload", "cache"))
    flushed = cache.get("flushed")
    return Manifest(
        version=int(raw["manifest_version"]),
        run_id=str(raw.get("run_id") or ""),
        status=str(raw.get("status") or "complete"),
        partial=bool(raw.get("partial")),
        partial_reason=as_text(raw.get("partial_reason")),
        crashed=bool(raw.get("crashed")),
        started_at=as_text(raw.get("started_at")),
        ended_at=as_text(raw.get("ended_at")),
        tool=Tool(as_text(tool.get("name")), as_text(tool.get("version")), as_text(tool.get("git_sha"))),
        client=Client(
            as_text(client.get("hostname")),
            as_text(client.get("cpu_model")),
            as_int(client.get("cpu_count")),
            as_text(client.get("event_loop")),
            as_dict(client.get("load")),
            as_text(client.get("arrival_stamps")),
            as_bool(client.get("native_reads")),
            as_text(client.get("send_priority")),
        ),
        config=as_dict(raw.get("config")),
        workload=Workload(
            as_text(wl.get("name")),
            as_text(wl.get("fingerprint")),
            as_text(wl.get("definition_fingerprint")),
            wl.get("input_len"),
            wl.get("output_len"),
            as_int(wl.get("num_requests")),
            wl,
        ),
        engine=_engine(raw.get("engine")),
        exporter=_exporter(raw.get("exporter")),
        cache=Cache(flushed if isinstance(flushed, bool) else None, as_text(cache.get("method")), cache),
        experiment=_experiment(raw.get("experiment")),
        shard=_shard(raw.get("shard")),
        shards=as_dict(raw.get("shards")),
        workers=as_dict(raw.get("workers")),
        baseline=as_dict(raw.get("baseline")),
        raw=raw,
    )


def _load(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except OSError as exc:
        raise ManifestError(f"{path}: cannot read ({exc.strerror or type(exc).__name__})") from None
    except ValueError as exc:
        raise ManifestError(f"{path}: not JSON ({exc})") from None


def read_manifest(source: str | Path | Mapping[str, Any] | Manifest, where: str = "manifest") -> Manifest:
    """THE reader of a run manifest: a file (must hold a `run_id`) or an already loaded object
    (`where` names it in errors: a store row), upgraded to MANIFEST_VERSION; a Manifest is
    returned as it is. Raises ManifestError."""
    if isinstance(source, Manifest):
        return source
    from_file = isinstance(source, str | Path)
    if isinstance(source, str | Path):
        where, source = str(source), _load(Path(source))
    if not isinstance(source, Mapping):
        raise ManifestError(
            f"{where}: not a run manifest (a JSON object expected, got {type(source).__name__})"
        )
    if from_file and not isinstance(source.get("run_id"), str):
        raise ManifestError(f"{where}: not a run manifest (no `run_id`)")
    return _typed(upgrade(source, where))
