"""The run manifest's one schema: typed, frozen views of the parts readers use (identity, tool,
client, config, workload, engine, exporter, cache, experiment, shard), a `manifest_version`, and ONE
reader, `read_manifest`, that upgrades older records on read (docs/run-record.md).

Versions: 1 = records written before the field existed (no `manifest_version`, no `status`, no
`engine.param_sources`); 2 = today's (`manifest_version: 2` written first in every new record).
A record of a newer version than this loadgen knows, or one that is no JSON object, is a one-line
`ManifestError` naming the file."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

MANIFEST_VERSION = 2
SERVED = "served"  # the key of the exporter's engine that served the run
SECTIONS = ("tool", "client", "config", "workload", "engine", "exporter", "cache")


class ManifestError(ValueError):
    """A file or value that is no run manifest this loadgen can read (one line, names the file)."""


def as_dict(value: Any) -> Mapping[str, Any]:
    """`value` when it is a JSON object, else an empty one (a missing or odd section reads as empty)."""
    return value if isinstance(value, Mapping) else {}


def _str(value: Any) -> str | None:
    return None if value is None or isinstance(value, Mapping | list) else str(value)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def url_port(url: Any) -> int | None:
    """The port of a URL (None when it has none or is no URL)."""
    try:
        return urlsplit(str(url or "")).port
    except ValueError:
        return None


def _host(url: Any) -> str | None:
    try:
        return urlsplit(str(url or "")).hostname
    except ValueError:
        return None


@dataclass(frozen=True)
class Tool:
    """Name, version and commit of the loadgen that wrote the record."""

    name: str | None
    version: str | None
    git_sha: str | None


@dataclass(frozen=True)
class Client:
    """Where the load generator ran."""

    hostname: str | None
    cpu_model: str | None
    cpu_count: int | None
    event_loop: str | None
    load: Mapping[str, Any]


@dataclass(frozen=True)
class Workload:
    """The workload's description and fingerprints (the rest of the section is in `raw`)."""

    name: str | None
    fingerprint: str | None
    definition_fingerprint: str | None
    input_len: Any
    output_len: Any
    num_requests: int | None
    raw: Mapping[str, Any]


@dataclass(frozen=True)
class EngineBlock:
    """What the engine said over HTTP and the one resolution of its neutral parameters."""

    engine: str | None
    target_preset: str | None
    version: str | None
    model: str | None
    max_model_len: int | None
    base_url: str | None
    params: Mapping[str, Any]
    param_sources: Mapping[str, Any]
    server_args: Mapping[str, Any]

    @property
    def port(self) -> int | None:
        """The port of the engine the run sent its load to."""
        return url_port(self.base_url)


@dataclass(frozen=True)
class ExporterEngine:
    """One engine the exporter watched, named by a stable identity (never by its list position)."""

    engine: str | None
    version: str | None
    model: str | None
    url: str | None
    pid: int | None
    params: Mapping[str, Any]
    raw: Mapping[str, Any]

    @property
    def port(self) -> int | None:
        """The port it serves on."""
        return url_port(self.url)

    @property
    def identity(self) -> str:
        """`<engine>@<host>:<port>` (stable across restarts), else `<engine>@pid:<pid>`, else the name."""
        name = self.engine or "engine"
        if self.port is not None:
            return f"{name}@{_host(self.url) or '?'}:{self.port}"
        return f"{name}@pid:{self.pid}" if self.pid is not None else name


@dataclass(frozen=True)
class Exporter:
    """The exporter's host manifest as the run recorded it (`present` False when it had none)."""

    present: bool
    host: Mapping[str, Any]
    gpus: tuple[Mapping[str, Any], ...]
    engines: tuple[ExporterEngine, ...]
    checks: tuple[Mapping[str, Any], ...]

    def by_identity(self, served: ExporterEngine | None = None) -> dict[str, ExporterEngine]:
        """key -> engine: `served` for the engine that served the run (matched across runs whatever
        its port: a launched engine gets a free one each pass), every other by its identity (a second
        one of the same identity gets `#2`, `#3`...). List positions never matter."""
        out: dict[str, ExporterEngine] = {SERVED: served} if served is not None else {}
        for engine in self.engines:
            if engine is served:
                continue
            key, n = engine.identity, 1
            while key in out:
                n += 1
                key = f"{engine.identity}#{n}"
            out[key] = engine
        return out

    def serving(self, port: int | None) -> ExporterEngine | None:
        """The watched engine on the run's port, else the only one watched, else None."""
        for engine in self.engines:
            if port is not None and engine.port == port:
                return engine
        return self.engines[0] if len(self.engines) == 1 else None


@dataclass(frozen=True)
class Cache:
    """The prefix-cache state the run started from and what it measured (rest in `raw`)."""

    flushed: bool | None
    method: str | None
    raw: Mapping[str, Any]


@dataclass(frozen=True)
class Experiment:
    """The plan entry a run belongs to (None for a run outside an experiment)."""

    phase: str | None
    variant: str | None
    engine: str | None
    workload: str | None
    slo: tuple[Any, ...]
    raw: Mapping[str, Any]


@dataclass(frozen=True)
class Shard:
    """The slice of one run this process sent (`--shard i/N`)."""

    index: int
    count: int | None
    raw: Mapping[str, Any]


@dataclass(frozen=True)
class Manifest:
    """One run manifest, upgraded to MANIFEST_VERSION; `raw` is the upgraded JSON object itself."""

    version: int
    run_id: str
    status: str
    partial: bool
    partial_reason: str | None
    crashed: bool
    started_at: str | None
    ended_at: str | None
    tool: Tool
    client: Client
    config: Mapping[str, Any]  # the resolved run config, verbatim
    workload: Workload
    engine: EngineBlock
    exporter: Exporter
    cache: Cache
    experiment: Experiment | None
    shard: Shard | None  # a shard's own record (`--shard i/N`)
    shards: Mapping[str, Any]  # a merged run's: count, merged, not_whole, skew, records
    workers: Mapping[str, Any]  # a `--workers` run's: count, start, cores
    baseline: Mapping[str, Any]
    raw: Mapping[str, Any]

    def exporter_raw(self) -> Mapping[str, Any]:
        """The exporter's host manifest as recorded (empty without an exporter)."""
        return as_dict(self.raw.get("exporter"))

    def served_by(self) -> ExporterEngine | None:
        """The exporter's engine that served this run (same port as its base URL), else the only one."""
        return self.exporter.serving(self.engine.port)

    def watched_engines(self) -> dict[str, ExporterEngine]:
        """The exporter's engines by stable key (Exporter.by_identity): `served`, `vllm@host:port`..."""
        return self.exporter.by_identity(self.served_by())


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
            _str(e.get("engine")),
            _str(e.get("version")),
            _str(e.get("model")),
            _str(e.get("url")),
            _int(e.get("pid")),
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
        _str(e.get("engine")),
        _str(e.get("target_preset")),
        _str(e.get("version")),
        _str(e.get("model")),
        _int(e.get("max_model_len")),
        _str(e.get("base_url")),
        as_dict(e.get("params")),
        as_dict(e.get("param_sources")),
        as_dict(e.get("server_args")),
    )


def _experiment(raw: Any) -> Experiment | None:
    if not isinstance(raw, Mapping) or not raw:
        return None
    slo = raw.get("slo")
    return Experiment(
        _str(raw.get("phase")),
        _str(raw.get("variant")),
        _str(raw.get("engine")),
        _str(raw.get("workload")),
        tuple(slo) if isinstance(slo, list) else (),
        raw,
    )


def _shard(raw: Any) -> Shard | None:
    if not isinstance(raw, Mapping) or _int(raw.get("index")) is None:
        return None
    return Shard(int(raw["index"]), _int(raw.get("count")), raw)


def _typed(raw: Mapping[str, Any]) -> Manifest:
    tool, client, wl, cache = (as_dict(raw.get(k)) for k in ("tool", "client", "workload", "cache"))
    flushed = cache.get("flushed")
    return Manifest(
        version=int(raw["manifest_version"]),
        run_id=str(raw.get("run_id") or ""),
        status=str(raw.get("status") or "complete"),
        partial=bool(raw.get("partial")),
        partial_reason=_str(raw.get("partial_reason")),
        crashed=bool(raw.get("crashed")),
        started_at=_str(raw.get("started_at")),
        ended_at=_str(raw.get("ended_at")),
        tool=Tool(_str(tool.get("name")), _str(tool.get("version")), _str(tool.get("git_sha"))),
        client=Client(
            _str(client.get("hostname")),
            _str(client.get("cpu_model")),
            _int(client.get("cpu_count")),
            _str(client.get("event_loop")),
            as_dict(client.get("load")),
        ),
        config=as_dict(raw.get("config")),
        workload=Workload(
            _str(wl.get("name")),
            _str(wl.get("fingerprint")),
            _str(wl.get("definition_fingerprint")),
            wl.get("input_len"),
            wl.get("output_len"),
            _int(wl.get("num_requests")),
            wl,
        ),
        engine=_engine(raw.get("engine")),
        exporter=_exporter(raw.get("exporter")),
        cache=Cache(flushed if isinstance(flushed, bool) else None, _str(cache.get("method")), cache),
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


def read_manifest(source: str | Path | Mapping[str, Any] | Manifest) -> Manifest:
    """THE reader of a run manifest: a file (must hold a `run_id`) or an already loaded object,
    upgraded to MANIFEST_VERSION; a Manifest is returned as it is. Raises ManifestError."""
    if isinstance(source, Manifest):
        return source
    where = "manifest"
    if isinstance(source, str | Path):
        where, source = str(source), _load(Path(source))
    if not isinstance(source, Mapping):
        raise ManifestError(
            f"{where}: not a run manifest (a JSON object expected, got {type(source).__name__})"
        )
    if where != "manifest" and not isinstance(source.get("run_id"), str):
        raise ManifestError(f"{where}: not a run manifest (no `run_id`)")
    return _typed(upgrade(source, where))
