"""Translate launch lines between vLLM and SGLang, and compare two engines' effective parameters.

The flag tables live in the engine files (`infergauge/engines/*.py`, one vocabulary for the exporter,
align and diff); this module adds what a translation must warn about: flags with no exact equivalent.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from infergauge import engines
from infergauge.engines.base import AUTO, NEUTRAL_PARAMS, EngineSpec
from infergauge.engines.params import neutral_sources, parse_cmdline, to_cmdline, to_neutral

# Flags both engines spell the same way and mean the same thing.
PASS_THROUGH = (
    "host",
    "port",
    "served_model_name",
    "trust_remote_code",
    "revision",
    "api_key",
    "tokenizer",
    "download_dir",
    "load_format",
)
SECRET = ("api_key",)
# 'auto' defaults each engine derives by its own rule (GPU memory, model), so they rarely agree.
DECIDED_DIFFERENTLY = ("max_num_seqs", "max_num_batched_tokens", "gpu_memory_utilization")


def _approximate(source: EngineSpec, target: EngineSpec, given: Mapping[str, object]) -> list[str]:
    """Why a mapped parameter is still not an exact equivalent: each engine's note on its flag."""
    out = []
    for key in given:
        notes = [n for n in (source.param_notes.get(key), target.param_notes.get(key)) if n]
        if notes:
            out.append(f"{key}: approximate — {'; '.join(dict.fromkeys(notes))}")
    return out


@dataclass(frozen=True)
class Translation:
    """A translated launch line and the warnings a reader must see."""

    source: str
    target: str
    argv: list[str]
    warnings: list[str] = field(default_factory=list)

    @property
    def command(self) -> str:
        """The translated command, shell-quoted."""
        return shlex.join(self.argv)


class AlignError(ValueError):
    """A launch line that cannot be translated; the message names the problem."""


def _flag_spelling(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def _pass_through(args: Mapping[str, Any], warnings: list[str]) -> list[str]:
    out: list[str] = []
    for dest in PASS_THROUGH:
        if dest not in args:
            continue
        value = args[dest]
        if dest in SECRET:
            warnings.append(f"{_flag_spelling(dest)}: value redacted; put your key back in")
            value = "<redacted>"
        out += [_flag_spelling(dest)] if value is True else [_flag_spelling(dest), str(value)]
    return out


def _unmapped(source: EngineSpec, args: Mapping[str, Any], target: str) -> list[str]:
    mapped = {flag.dest for flag in source.flags.values()} | {s.dest for s in source.switches.values()}
    mapped |= set(PASS_THROUGH) | {"model", "model_path"}
    return [f"{_flag_spelling(dest)}: no {target} equivalent; dropped" for dest in args if dest not in mapped]


def _default_gaps(source: EngineSpec, target: EngineSpec, sources: Mapping[str, str]) -> list[str]:
    out = []
    for key in NEUTRAL_PARAMS:
        if sources[key] == "flag":
            continue
        a, b = source.defaults.get(key), target.defaults.get(key)
        if a != b or (a == AUTO and key in DECIDED_DIFFERENTLY):
            why = " (each engine decides 'auto' its own way)" if AUTO in (a, b) else ""
            out.append(
                f"{key} not set: {source.name} default {a}, {target.name} default {b}{why}; "
                "set it on both to compare like with like"
            )
    return out


def _target(source: EngineSpec, target: str | None) -> EngineSpec:
    name = target or source.counterpart or ""
    spec = engines.ENGINES.get(name)
    if spec is None or not spec.launcher:
        choices = ", ".join(n for n, s in engines.ENGINES.items() if s.launcher)
        raise AlignError(f"invalid target engine {name!r}; choose from {choices}")
    return spec


def translate(argv: Sequence[str], target: str | None = None) -> Translation:
    """Translate a launch line of a registered engine to another engine's spelling."""
    source, args = parse_cmdline(list(argv))
    if source is None:
        expected = " or ".join(
            f"`{shlex.join(s.launcher)} ...`" for s in engines.ENGINES.values() if s.launcher
        )
        raise AlignError(f"not a launch line of a known engine: {shlex.join(argv)!r} (expected {expected})")
    spec = _target(source, target)
    sources = neutral_sources(source, args)
    neutral = to_neutral(source, args)
    given = {k: v for k, v in neutral.items() if sources[k] == "flag"}
    warnings: list[str] = []
    out = list(spec.launcher)
    model = args.get("model") or args.get("model_path")
    if model:
        out += [spec.model_flag, str(model)] if spec.model_flag else [str(model)]
    out += to_cmdline(spec, given)
    out += _pass_through(args, warnings)
    warnings += _approximate(source, spec, given)
    warnings += _unmapped(source, args, spec.name)
    warnings += _default_gaps(source, spec, sources)
    return Translation(source.name, spec.name, out, warnings)


@dataclass(frozen=True)
class ParamDifference:
    """One neutral parameter whose effective values differ between two engines."""

    param: str
    a: Any
    b: Any


def _undecided(value: Any) -> bool:
    return isinstance(value, str) and value.lower() == AUTO


def compare_params(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[ParamDifference]:
    """Neutral parameters whose values differ (neutral vocabulary order, then any others); a value
    one side left to the engine ('auto', not resolved) or could not read (None: unknown) is no
    difference (see `undecided`; the caller names the unknown ones)."""
    keys = [k for k in NEUTRAL_PARAMS if k in a or k in b]
    keys += sorted((set(a) | set(b)) - set(NEUTRAL_PARAMS))
    return [
        ParamDifference(k, a.get(k), b.get(k))
        for k in keys
        if a.get(k) != b.get(k)
        and not (_undecided(a.get(k)) or _undecided(b.get(k)))
        and None not in (a.get(k), b.get(k))
    ]


def undecided(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
    """Parameters either side leaves to the engine ('auto'), where that may hide a difference: the
    values differ, or each engine decides 'auto' by its own rule (DECIDED_DIFFERENTLY)."""
    keys = [k for k in NEUTRAL_PARAMS if k in a or k in b]
    return [
        k
        for k in keys
        if (_undecided(a.get(k)) or _undecided(b.get(k)))
        and (a.get(k) != b.get(k) or k in DECIDED_DIFFERENTLY)
    ]
