"""What `loadgen diff` compares, read from one stored run: who served it (engine, version, model,
endpoint), what each request measured (tokens), and the engine-neutral launch parameters, resolved
once (the run's `engine.params`, the exporter's view of the same engine where the run has none)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from infergauge.engines import ENGINES
from infergauge.engines.base import AUTO, NEUTRAL_PARAMS
from infergauge.engines.resolve import DEFAULT

# Raw argument names that spell the served model or the engine's version (context, never a cause).
IDENTITY_SPELLINGS = frozenset(
    {"model", "model_path", "served_model_name", "tokenizer", "tokenizer_path", "version"}
)


@dataclass(frozen=True)
class RunFacts:
    """The facts of one run that `loadgen diff` ranks above every raw key."""

    engine: str | None
    version: str | None
    model: str | None
    endpoint: str | None
    input_tokens: float | None  # measured, per successful request
    output_tokens: float | None
    params: dict[str, Any] = field(default_factory=dict)  # neutral name -> value (None: unknown)
    param_sources: dict[str, str] = field(default_factory=dict)  # neutral name -> manifest key


def neutral_spellings() -> dict[str, str]:
    """Each engine's own argument name -> the neutral parameter it sets (tp_size -> tensor_parallel_size)."""
    out = {name: name for name in NEUTRAL_PARAMS}
    for spec in ENGINES.values():
        for neutral, flag in spec.flags.items():
            out[flag.dest] = neutral
            out.update(
                {s.lstrip("-").replace("-", "_"): neutral for s in flag.spellings if s.startswith("--")}
            )
    return out


def _port(url: Any) -> int | None:
    try:
        return urlsplit(str(url or "")).port
    except ValueError:
        return None


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def exporter_engine(manifest: Mapping[str, Any]) -> tuple[int, dict[str, Any]] | None:
    """The exporter's engine that served this run (same port as the run's base URL), else the only one."""
    engines = _dict(manifest.get("exporter")).get("engines")
    engines = [e for e in engines if isinstance(e, dict)] if isinstance(engines, list) else []
    port = _port(_dict(manifest.get("engine")).get("base_url"))
    for index, engine in enumerate(engines):
        if port is not None and _port(engine.get("url")) == port:
            return index, engine
    return (0, engines[0]) if len(engines) == 1 else None


def _auto(value: Any) -> bool:
    return isinstance(value, str) and value.lower() == AUTO


def _unknown(value: Any, source: Any, flags_read: bool) -> bool:
    """A recorded value that is no fact: 'auto' (the engine decides at start-up), or the engine's
    default filled in by a run that read neither launch flags nor server info (old records did)."""
    return _auto(value) or (source == DEFAULT and not flags_read) or str(source).startswith("unknown")


def resolve_params(manifest: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """Neutral params and where each came from: `engine.params` (with its recorded
    `engine.param_sources` entry, where there is one), else the exporter's engine of the run."""
    engine = _dict(manifest.get("engine"))
    own, provenance = _dict(engine.get("params")), _dict(engine.get("param_sources"))
    found = exporter_engine(manifest)
    theirs = _dict(found[1].get("params")) if found else {}
    params: dict[str, Any] = {}
    sources: dict[str, str] = {}
    flags_read = found is not None or bool(engine.get("server_args"))
    for name in NEUTRAL_PARAMS:
        if _unknown(own.get(name), provenance.get(name), flags_read):
            own = {**own, name: None}  # a guess is no fact: the exporter's reading may still tell
        if own.get(name) is not None:
            via = f" ({provenance[name]})" if isinstance(provenance.get(name), str) else ""
            params[name], sources[name] = own[name], f"engine.params.{name}{via}"
        elif found and theirs.get(name) is not None and not _auto(theirs[name]):
            params[name], sources[name] = theirs[name], f"exporter.engines.{found[0]}.params.{name}"
        else:
            params[name] = None
    return params, sources


def _per_request(summary: Mapping[str, Any], total_key: str) -> float | None:
    total = summary.get(total_key)
    ok = _dict(summary.get("requests")).get("ok")
    if not isinstance(total, int | float) or not isinstance(ok, int) or ok <= 0:
        return None
    return total / ok


def run_facts(manifest: Mapping[str, Any], summary: Mapping[str, Any]) -> RunFacts:
    """The ranked facts of one run (missing ones are None; nothing here raises on an odd manifest)."""
    engine, config = _dict(manifest.get("engine")), _dict(manifest.get("config"))
    found = exporter_engine(manifest)
    seen = found[1] if found else {}
    params, sources = resolve_params(manifest)
    return RunFacts(
        engine=engine.get("engine") or seen.get("engine"),
        version=engine.get("version") or seen.get("version"),
        model=engine.get("model") or config.get("model") or seen.get("model"),
        endpoint=config.get("endpoint"),
        input_tokens=_per_request(summary, "total_input_tokens"),
        output_tokens=_per_request(summary, "total_output_tokens"),
        params=params,
        param_sources=sources,
    )
