"""Engine-neutral launch parameters: one vocabulary over each engine's own flag spelling.

    spec, args = parse_cmdline(["vllm", "serve", "m", "--max-num-seqs", "128"])
    to_neutral(spec, args)["max_num_seqs"]                 # 128
    from_neutral(get("sglang"), {"max_num_seqs": 128})     # {"max_running_requests": 128}
    to_cmdline(get("sglang"), {"max_num_seqs": 128})       # ["--max-running-requests", "128"]

Defaults (a flag absent) are each engine's documented ones (`EngineSpec.defaults`); where the engine
decides at start-up the value is AUTO, unless a `GpuDefault` and the GPU tell. Engine differences
(inverted flags, switches, "off" values) are data in the spec, never a branch here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from infergauge.engines import detect_cmdline
from infergauge.engines.base import AUTO, NEUTRAL_PARAMS, EngineSpec, Flag, Value


def _known_flags(spec: EngineSpec) -> dict[str, Flag]:
    by_spelling: dict[str, Flag] = {}
    for known in spec.flags.values():
        for spelling in known.spellings:
            by_spelling[spelling] = known
        if known.negation:
            by_spelling[known.negation] = known
    return by_spelling


def _convert(known: Flag | None, raw: str) -> Value:
    if known is None or known.kind is str:
        return raw
    try:
        if known.kind is bool:
            return raw.lower() in ("1", "true", "yes", "on")
        return int(raw) if known.kind is int else float(raw)
    except ValueError:
        return raw


def arg_value(spec: EngineSpec, dest: str, raw: str) -> Value:
    """A text value of the engine's argument `dest` in that argument's type ("16" -> 16, "True" -> True)."""
    return _convert(next((f for f in spec.flags.values() if f.dest == dest), None), raw)


def _is_value(token: str) -> bool:
    if not token.startswith("-"):
        return True
    try:
        float(token)
    except ValueError:
        return False
    return True


def _canonical(name: str) -> str:
    return "--" + name[2:].replace("_", "-") if name.startswith("--") else name  # `--max_num_seqs` too


def parse_flags(spec: EngineSpec, tokens: Sequence[str]) -> dict[str, Value]:
    """Parse flags (`--x v`, `--x=v`, bare booleans, `--no-x`) into {dest: typed value}; a multi-value
    flag (`--api-key k1 k2`) keeps its values as one space-joined string."""
    known = _known_flags(spec)
    args: dict[str, Value] = {}
    i = 0
    while i < len(tokens):
        token, i = tokens[i], i + 1
        if _is_value(token):
            args.setdefault("model", token)  # `vllm serve MODEL`
            continue
        name, has_eq, raw = token.partition("=")
        name = _canonical(name)
        found = known.get(name)
        dest = found.dest if found else name.lstrip("-").replace("-", "_")
        if found is not None and found.negation == name:
            args[dest] = False
        elif has_eq:
            args[dest] = _convert(found, raw)
        elif (found is not None and found.kind is bool) or name in spec.bool_flags:
            args[dest] = True
        elif i < len(tokens) and _is_value(tokens[i]):
            values = [tokens[i]]
            i += 1
            while found is None and i < len(tokens) and not tokens[i].startswith("-"):
                values.append(tokens[i])  # nargs="+" flags such as vLLM's --api-key k1 k2
                i += 1
            args[dest] = _convert(found, " ".join(values))
        else:
            args[dest] = True
    if "model_path" in args and "model" not in args:
        args["model"] = args["model_path"]
    return args


def parse_cmdline(argv: Sequence[str]) -> tuple[EngineSpec | None, dict[str, Value]]:
    """(engine, {dest: value}) from a full command line; (None, {}) when it launches no engine."""
    spec, start = detect_cmdline(argv)
    if spec is None:
        return None, {}
    return spec, parse_flags(spec, argv[start:])


def default_value(
    spec: EngineSpec, key: str, gpu_memory_bytes: int | None = None, gpu_name: str = ""
) -> Value:
    """The engine's default for a neutral param; a GPU-dependent AUTO resolved when the GPU is known."""
    default = spec.defaults.get(key)
    rule = spec.gpu_defaults.get(key)
    if default != AUTO or rule is None or gpu_memory_bytes is None:
        return default
    excluded = any(word in gpu_name.lower() for word in rule.excluded)
    return rule.large if gpu_memory_bytes >= rule.min_bytes and not excluded else rule.small


def _set(args: Mapping[str, Value], dest: str) -> bool:
    return args.get(dest) is not None


def _same(a: Value, b: Value) -> bool:
    return str(a).lower() == str(b).lower()


def stated(spec: EngineSpec, args: Mapping[str, Value]) -> dict[str, Value]:
    """The neutral params that `args` (engine spelling) actually state, nothing defaulted."""
    out: dict[str, Value] = {}
    for key in NEUTRAL_PARAMS:
        switch = spec.switches.get(key)
        known = spec.flags.get(key)
        if known is not None and _set(args, known.dest):
            value = args[known.dest]
            if known.off is not None and _same(value, known.off):
                value = None
            out[key] = (not bool(value)) if known.inverted else value
        if switch is not None and _set(args, switch.dest):
            out[key] = not _same(args[switch.dest], switch.off)
    return out


def neutral_sources(spec: EngineSpec, args: Mapping[str, Value]) -> dict[str, str]:
    """For each neutral param: "flag" when `args` set it, else "default"."""
    given = stated(spec, args)
    return {key: "flag" if key in given else "default" for key in NEUTRAL_PARAMS}


def to_neutral(
    spec: EngineSpec, args: Mapping[str, Value], *, gpu_memory_bytes: int | None = None, gpu_name: str = ""
) -> dict[str, Value]:
    """All neutral params from an engine's args, defaults filled (AUTO where the engine decides)."""
    given = stated(spec, args)
    return {
        key: given[key] if key in given else default_value(spec, key, gpu_memory_bytes, gpu_name)
        for key in NEUTRAL_PARAMS
    }


def from_neutral(spec: EngineSpec, params: Mapping[str, Value]) -> dict[str, Value]:
    """An engine's own {dest: value} for the given neutral params (None and AUTO values left out)."""
    unknown = sorted(set(params) - set(NEUTRAL_PARAMS))
    if unknown:
        raise ValueError(f"unknown parameter {unknown[0]!r}; choose from {', '.join(NEUTRAL_PARAMS)}")
    out: dict[str, Value] = {}
    for key, value in params.items():
        if value is None or value == AUTO:
            continue
        known, switch = spec.flags.get(key), spec.switches.get(key)
        if known is not None:
            out[known.dest] = (not value) if known.inverted else value
        elif switch is not None and value is False:
            out[switch.dest] = switch.off
    return out


def to_cmdline(spec: EngineSpec, params: Mapping[str, Value]) -> list[str]:
    """Command-line flags (the engine's spelling) that set the given neutral params."""
    table = {f.dest: f for f in spec.flags.values()}
    argv: list[str] = []
    for dest, value in from_neutral(spec, params).items():
        known = table.get(dest)
        if known is not None and known.kind is bool:
            if value:
                argv.append(known.spellings[0])
            elif known.negation:
                argv.append(known.negation)
            continue
        argv += [known.spellings[0] if known else "--" + dest.replace("_", "-"), str(value)]
    return argv


def model_of(spec: EngineSpec, args: Mapping[str, Value]) -> str | None:
    """The served model name from the engine's args (its model flags in order)."""
    return next((str(args[dest]) for dest in spec.model_flags if args.get(dest)), None)
