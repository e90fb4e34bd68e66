"""One rule per field that more than one reader shows (runs.csv, `loadgen diff`, the report's
series labels, the store): who served the run, its version and model, its GPUs, and the neutral
launch parameters resolved once (the run's `engine.params`, the exporter's view of the same engine
where the run has none). Every function reads through the one schema (manifest_schema)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from infergauge.engines.base import AUTO, NEUTRAL_PARAMS
from infergauge.engines.resolve import DEFAULT
from loadgen.results.manifest_schema import SERVED, Manifest, read_manifest

ManifestLike = Manifest | Mapping[str, Any]


def _auto(value: Any) -> bool:
    return isinstance(value, str) and value.lower() == AUTO


def _unknown(value: Any, source: Any, flags_read: bool) -> bool:
    """A recorded value that is no fact: 'auto' (the engine decides at start-up), or the engine's
    default filled in by a run that read neither launch flags nor server info (old records did)."""
    return _auto(value) or (source == DEFAULT and not flags_read) or str(source).startswith("unknown")


def resolve_params(manifest: ManifestLike) -> tuple[dict[str, Any], dict[str, str]]:
    """Neutral params and where each came from: `engine.params` (with its recorded
    `engine.param_sources` entry, where there is one), else the exporter's engine of the run (named
    by its key and identity, `exporter.engines[served].params.max_num_seqs (vllm@127.0.0.1:8000)`)."""
    m = read_manifest(manifest)
    own, provenance = dict(m.engine.params), m.engine.param_sources
    found = m.served_by()
    theirs = found.params if found else {}
    params: dict[str, Any] = {}
    sources: dict[str, str] = {}
    flags_read = found is not None or bool(m.engine.server_args)
    for name in NEUTRAL_PARAMS:
        if _unknown(own.get(name), provenance.get(name), flags_read):
            own[name] = None  # a guess is no fact: the exporter's reading may still tell
        if own.get(name) is not None:
            via = f" ({provenance[name]})" if isinstance(provenance.get(name), str) else ""
            params[name], sources[name] = own[name], f"engine.params.{name}{via}"
        elif found and theirs.get(name) is not None and not _auto(theirs[name]):
            params[name] = theirs[name]
            sources[name] = f"exporter.engines[{SERVED}].params.{name} ({found.identity})"
        else:
            params[name] = None
    return params, sources


def engine_name(manifest: ManifestLike) -> str | None:
    """The engine that answered (its own word, else the exporter's engine of the run)."""
    m = read_manifest(manifest)
    seen = m.served_by()
    return m.engine.engine or (seen.engine if seen else None)


def engine_version(manifest: ManifestLike) -> str | None:
    """The engine's version (its own word, else the exporter's reading of its process)."""
    m = read_manifest(manifest)
    seen = m.served_by()
    return m.engine.version or (seen.version if seen else None)


def model_name(manifest: ManifestLike) -> str | None:
    """The model the run's requests asked for: its `--model`, else the engine's first listed model
    (the summary's `model`, by the same rule), else the exporter's view."""
    m = read_manifest(manifest)
    seen = m.served_by()
    return _text(m.config.get("model")) or m.engine.model or (seen.model if seen else None)


def _text(value: Any) -> str | None:
    return str(value) if value else None


def gpu_name(manifest: ManifestLike) -> str | None:
    """The first GPU's model name from the exporter's manifest (None without an exporter)."""
    gpus = read_manifest(manifest).exporter.gpus
    return _text(gpus[0].get("name")) if gpus else None


def gpu_count(manifest: ManifestLike) -> int | None:
    """How many GPUs the exporter's host has (None without an exporter)."""
    return len(read_manifest(manifest).exporter.gpus) or None


def length_spec(manifest: ManifestLike, key: str) -> Any:
    """The configured `input_len` / `output_len` (`fixed:64`): the workload's, else the run config's."""
    m = read_manifest(manifest)
    return m.workload.raw.get(key) or m.config.get(key)
