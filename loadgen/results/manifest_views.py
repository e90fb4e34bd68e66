"""The typed, frozen views of a run manifest's parts (loadgen.results.manifest_schema builds them
from the upgraded record and re-exports them): identity, tool, client, workload, engine, the
exporter and its engines by identity, cache, experiment, shard."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from infergauge.engines.serving import engine_ports, explicit_port, serves, url_host

SERVED = "served"  # the key of the exporter's engine that served the run


def as_dict(value: Any) -> Mapping[str, Any]:
    """`value` when it is a JSON object, else an empty one (a missing or odd section reads as empty)."""
    return value if isinstance(value, Mapping) else {}


def as_text(value: Any) -> str | None:
    """A scalar as text (None for None, an object or a list)."""
    return None if value is None or isinstance(value, Mapping | list) else str(value)


def as_bool(value: Any) -> bool | None:
    """A boolean (None for anything else)."""
    return value if isinstance(value, bool) else None


def as_int(value: Any) -> int | None:
    """An int (None for anything else, booleans included)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


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
    arrival_stamps: str | None = None  # kernel | read | mixed; None in records before it was written
    native_reads: bool | None = None  # the raw client's reads in C; None in records before it was written
    send_priority: str | None = None  # realtime | short-slice | none: how the send thread got the core


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
        return explicit_port(self.base_url)


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
        """The port of its URL."""
        return explicit_port(self.url)

    @property
    def ports(self) -> set[int]:
        """Ports it serves on (infergauge.engines.serving.engine_ports, the rule an exporter is
        attached by)."""
        return engine_ports(self.raw)

    @property
    def identity(self) -> str:
        """`<engine>@<host>:<port>` (stable across restarts), else `<engine>@pid:<pid>`, else the name."""
        name = self.engine or "engine"
        if self.port is not None:
            return f"{name}@{url_host(self.url) or '?'}:{self.port}"
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

    def serving(self, base_url: str | None) -> ExporterEngine | None:
        """The watched engine that serves `base_url` (its port, not another host), else the only one
        watched, else None."""
        for engine in self.engines:
            if serves(engine.raw, base_url):
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
        return self.exporter.serving(self.engine.base_url)

    def watched_engines(self) -> dict[str, ExporterEngine]:
        """The exporter's engines by stable key (Exporter.by_identity): `served`, `vllm@host:port`..."""
        return self.exporter.by_identity(self.served_by())
