"""What `loadgen diff` compares, read from one stored run: who served it (engine, version, model,
endpoint), what each request measured (tokens), and the engine-neutral launch parameters, resolved
once (the run's `engine.params`, the exporter's view of the same engine where the run has none)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from infergauge.engines import ENGINES
from infergauge.engines.base import NEUTRAL_PARAMS
from loadgen.results.manifest_schema import read_manifest
from loadgen.results.run_fields import (
    ManifestLike,
    engine_name,
    engine_version,
    model_name,
    resolve_params,
)

__all__ = ["IDENTITY_SPELLINGS", "RunFacts", "neutral_spellings", "resolve_params", "run_facts"]

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


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _per_request(summary: Mapping[str, Any], total_key: str) -> float | None:
    total = summary.get(total_key)
    ok = _dict(summary.get("requests")).get("ok")
    if not isinstance(total, int | float) or not isinstance(ok, int) or ok <= 0:
        return None
    return total / ok


def run_facts(manifest: ManifestLike, summary: Mapping[str, Any]) -> RunFacts:
    """The ranked facts of one run (missing ones are None; nothing here raises on an odd manifest),
    each by the one rule runs.csv shows it by (loadgen.results.run_fields)."""
    m = read_manifest(manifest)
    params, sources = resolve_params(m)
    return RunFacts(
        engine=engine_name(m),
        version=engine_version(m),
        model=model_name(m),
        endpoint=_text(m.config.get("endpoint")),
        input_tokens=_per_request(summary, "total_input_tokens"),
        output_tokens=_per_request(summary, "total_output_tokens"),
        params=params,
        param_sources=sources,
    )


def _text(value: Any) -> str | None:
    return None if value is None else str(value)
