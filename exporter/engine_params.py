"""Engine-neutral launch parameters: one vocabulary, each engine's flag spelling, documented defaults.

Standard library only: imported by the exporter and by `loadgen align` / `loadgen diff`.

    engine, args = parse_cmdline(["vllm", "serve", "m", "--max-num-seqs", "128"])
    to_neutral(engine, args)["max_num_seqs"]          # 128
    from_neutral("sglang", {"max_num_seqs": 128})     # {"max_running_requests": 128}
    to_cmdline("sglang", {"max_num_seqs": 128})       # ["--max-running-requests", "128"]

Defaults (when a flag is absent) follow each engine's documentation and source; where the engine
decides at start-up from the hardware or the model the value is `AUTO` ("auto"), unless the GPU is
known: vLLM's `max_num_seqs` / `max_num_batched_tokens` are 1024 / 8192 on GPUs with >= 70 GiB that
are not A100s, else 256 / 2048 (`EngineArgs.get_batch_defaults`, OpenAI API server context).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from exporter.redact import redact_mapping

Value = int | float | bool | str | None
AUTO = "auto"

NEUTRAL_PARAMS: tuple[str, ...] = (
    "tensor_parallel_size",
    "max_num_seqs",
    "gpu_memory_utilization",
    "max_model_len",
    "block_size",
    "chunked_prefill",
    "max_num_batched_tokens",
    "prefix_caching",
    "kv_cache_dtype",
    "quantization",
    "dtype",
    "seed",
)
ENGINES: tuple[str, ...] = ("vllm", "sglang", "simengine")


@dataclass(frozen=True)
class Flag:
    """One engine argument: its dest name, command-line spellings and value type."""

    dest: str
    spellings: tuple[str, ...]
    kind: type = str  # int | float | str | bool (a bool flag takes no value)
    negation: str | None = None  # e.g. vLLM's `--no-enable-prefix-caching`


def _f(dest: str, kind: type = str, *extra: str, negation: str | None = None) -> Flag:
    return Flag(dest, ("--" + dest.replace("_", "-"), *extra), kind, negation)


# neutral name -> the engine's own argument. Boolean-ish neutral params of SGLang are derived below.
VLLM_FLAGS: dict[str, Flag] = {
    "tensor_parallel_size": _f("tensor_parallel_size", int, "-tp"),
    "max_num_seqs": _f("max_num_seqs", int),
    "gpu_memory_utilization": _f("gpu_memory_utilization", float),
    "max_model_len": _f("max_model_len", int),
    "block_size": _f("block_size", int),
    "chunked_prefill": _f("enable_chunked_prefill", bool, negation="--no-enable-chunked-prefill"),
    "max_num_batched_tokens": _f("max_num_batched_tokens", int),
    "prefix_caching": _f("enable_prefix_caching", bool, negation="--no-enable-prefix-caching"),
    "kv_cache_dtype": _f("kv_cache_dtype"),
    "quantization": _f("quantization", str, "-q"),
    "dtype": _f("dtype"),
    "seed": _f("seed", int),
}
SGLANG_FLAGS: dict[str, Flag] = {
    "tensor_parallel_size": _f("tp_size", int, "--tensor-parallel-size", "--tp"),
    "max_num_seqs": _f("max_running_requests", int),
    "gpu_memory_utilization": _f("mem_fraction_static", float),
    "max_model_len": _f("context_length", int),
    "block_size": _f("page_size", int),
    # SGLang has no on/off switch: `--chunked-prefill-size -1` disables chunking; the chunk size is
    # the closest match of vLLM's per-step token budget `max_num_batched_tokens`.
    "max_num_batched_tokens": _f("chunked_prefill_size", int),
    "prefix_caching": _f("disable_radix_cache", bool),  # inverted
    "kv_cache_dtype": _f("kv_cache_dtype"),
    "quantization": _f("quantization"),
    "dtype": _f("dtype"),
    "seed": _f("random_seed", int),
}
# The simulated engine accepts both spellings; vLLM's are canonical for it.
# (SGLang's inverted `--disable-radix-cache` stays a plain extra flag, read in to_neutral.)
_SIM_SGLANG_ALIASES = frozenset(SGLANG_FLAGS) - {"prefix_caching"}
SIMENGINE_FLAGS: dict[str, Flag] = {
    key: Flag(
        flag.dest,
        flag.spellings + (SGLANG_FLAGS[key].spellings if key in _SIM_SGLANG_ALIASES else ()),
        flag.kind,
        flag.negation,
    )
    for key, flag in VLLM_FLAGS.items()
}
FLAG_TABLE: dict[str, dict[str, Flag]] = {
    "vllm": VLLM_FLAGS,
    "sglang": SGLANG_FLAGS,
    "simengine": SIMENGINE_FLAGS,
}

# Other boolean flags seen in launch lines (so that the token after them is not taken as a value).
_EXTRA_BOOL_FLAGS = frozenset(
    {
        "--enforce-eager",
        "--trust-remote-code",
        "--disable-log-requests",
        "--disable-log-stats",
        "--enable-metrics",
        "--disable-cuda-graph",
        "--enable-mixed-chunk",
        "--disable-overlap-schedule",
        "--enable-torch-compile",
        "--enable-dp-attention",
        "--skip-server-warmup",
        "--enable-log-requests",
    }
)

# Documented defaults per engine in the neutral vocabulary (vLLM 0.26 V1 engine, SGLang 0.5.x
# ServerArgs); AUTO = decided at start-up from GPU memory or the model's config.json.
DEFAULTS: dict[str, dict[str, Value]] = {
    "vllm": {
        "tensor_parallel_size": 1,
        "max_num_seqs": AUTO,
        "gpu_memory_utilization": 0.9,
        "max_model_len": AUTO,
        "block_size": 16,
        "chunked_prefill": True,
        "max_num_batched_tokens": AUTO,
        "prefix_caching": True,
        "kv_cache_dtype": "auto",
        "quantization": None,
        "dtype": "auto",
        "seed": 0,
    },
}
# SGLang differs from vLLM only here (keys keep vLLM's order)
DEFAULTS["sglang"] = {
    **DEFAULTS["vllm"],
    "gpu_memory_utilization": AUTO,
    "block_size": 1,
    "seed": AUTO,  # random per launch
}
DEFAULTS["simengine"] = dict(DEFAULTS["vllm"])

# Launch-line recognisers: engine -> predicate over argv.
_MODULES = {
    "vllm": ("vllm.entrypoints.openai.api_server", "vllm.entrypoints.api_server"),
    "sglang": ("sglang.launch_server",),
    "simengine": ("simengine",),
}


class UnknownEngine(ValueError):
    """Raised for an engine name outside ENGINES."""

    def __init__(self, engine: str) -> None:
        super().__init__(f"unknown engine {engine!r}; choose from {', '.join(ENGINES)}")


def _check_engine(engine: str) -> dict[str, Flag]:
    if engine not in FLAG_TABLE:
        raise UnknownEngine(engine)
    return FLAG_TABLE[engine]


def detect_engine(argv: Sequence[str]) -> tuple[str | None, int]:
    """Which engine a command line launches, and the index where its flags start (None if none).

    Recognised: `vllm serve`, `sglang serve`, `python -m vllm.entrypoints.openai.api_server`,
    `python -m sglang.launch_server`, `python -m simengine`, `loadgen sim`. Only the program and
    interpreter positions count, so `ruff check simengine` and `timeout 5 python -m simengine` (a
    wrapper; its child is the engine) are not engines.
    """
    interpreter = bool(argv) and argv[0].rsplit("/", 1)[-1].startswith("python")
    for i, token in enumerate(argv[:4]):
        base = token.rsplit("/", 1)[-1]
        nxt = argv[i + 1] if i + 1 < len(argv) else ""
        if token == "-m" and interpreter:
            for engine, modules in _MODULES.items():
                if nxt in modules:
                    return engine, i + 2
            return None, 0
        if (i == 0 or interpreter) and i <= 1 and base in ("vllm", "sglang") and nxt == "serve":
            return base, i + 2
        if (i == 0 or interpreter) and i <= 1 and base == "loadgen" and nxt == "sim":
            return "simengine", i + 2
    return None, 0


def _known_flags(engine: str) -> dict[str, Flag]:
    by_spelling: dict[str, Flag] = {}
    for flag in FLAG_TABLE[engine].values():
        for spelling in flag.spellings:
            by_spelling[spelling] = flag
        if flag.negation:
            by_spelling[flag.negation] = flag
    return by_spelling


def _convert(flag: Flag | None, raw: str) -> Value:
    if flag is None or flag.kind is str:
        return raw
    try:
        if flag.kind is bool:
            return raw.lower() in ("1", "true", "yes", "on")
        return int(raw) if flag.kind is int else float(raw)
    except ValueError:
        return raw


def _is_value(token: str) -> bool:
    if not token.startswith("-"):
        return True
    try:
        float(token)
    except ValueError:
        return False
    return True


def parse_flags(engine: str, tokens: Sequence[str]) -> dict[str, Value]:
    """Parse flags (`--x v`, `--x=v`, bare booleans, vLLM's `--no-x`) into {dest: typed value}."""
    known = _known_flags(engine)
    args: dict[str, Value] = {}
    i = 0
    while i < len(tokens):
        token = tokens[i]
        i += 1
        if not token.startswith("-") or _is_value(token):
            args.setdefault("model", token)  # `vllm serve MODEL`
            continue
        name, has_eq, raw = token.partition("=")
        if name.startswith("--"):
            name = "--" + name[2:].replace("_", "-")  # vLLM accepts `--max_num_seqs` too
        flag = known.get(name)
        dest = flag.dest if flag else name.lstrip("-").replace("-", "_")
        if flag is not None and flag.negation == name:
            args[dest] = False
        elif has_eq:
            args[dest] = _convert(flag, raw)
        elif (flag is not None and flag.kind is bool) or name in _EXTRA_BOOL_FLAGS:
            args[dest] = True
        elif i < len(tokens) and _is_value(tokens[i]):
            args[dest] = _convert(flag, tokens[i])
            i += 1
        else:
            args[dest] = True
    if "model_path" in args and "model" not in args:
        args["model"] = args["model_path"]
    return args


def parse_cmdline(argv: Sequence[str]) -> tuple[str | None, dict[str, Value]]:
    """(engine, {dest: value}) from a full command line; engine None when it launches no engine."""
    engine, start = detect_engine(argv)
    if engine is None:
        return None, {}
    return engine, parse_flags(engine, argv[start:])


def _resolve_auto(engine: str, key: str, gpu_memory_bytes: int | None, gpu_name: str) -> Value:
    default = DEFAULTS[engine][key]
    if engine != "vllm" or default != AUTO or gpu_memory_bytes is None:
        return default
    large = gpu_memory_bytes >= 70 * 2**30 and "a100" not in gpu_name.lower()
    if key == "max_num_seqs":
        return 1024 if large else 256
    if key == "max_num_batched_tokens":
        return 8192 if large else 2048
    return default


_SGLANG_DERIVED: dict[str, Callable[[Mapping[str, Value]], Value]] = {
    "prefix_caching": lambda a: not bool(a["disable_radix_cache"]),
    "chunked_prefill": lambda a: a.get("chunked_prefill_size") not in (-1, "-1"),
    "max_num_batched_tokens": lambda a: (
        None if a["chunked_prefill_size"] in (-1, "-1") else a["chunked_prefill_size"]
    ),
}


def neutral_sources(engine: str, args: Mapping[str, Value]) -> dict[str, str]:
    """For each neutral param: "flag" when the launch line set it, else "default"."""
    table = _check_engine(engine)
    set_dests = {dest for dest, value in args.items() if value is not None}
    sources = {
        key: "flag" if key in table and table[key].dest in set_dests else "default" for key in NEUTRAL_PARAMS
    }
    if engine == "sglang" and "chunked_prefill_size" in set_dests:
        sources["chunked_prefill"] = "flag"
    return sources


def to_neutral(
    engine: str, args: Mapping[str, Value], *, gpu_memory_bytes: int | None = None, gpu_name: str = ""
) -> dict[str, Value]:
    """The twelve neutral params from an engine's args, defaults filled (AUTO if hardware-decided)."""
    table = _check_engine(engine)
    sources = neutral_sources(engine, args)
    out: dict[str, Value] = {}
    for key in NEUTRAL_PARAMS:
        if sources[key] == "default":
            out[key] = _resolve_auto(engine, key, gpu_memory_bytes, gpu_name)
        elif engine == "sglang" and key in _SGLANG_DERIVED:
            derived_args = {**args, "disable_radix_cache": args.get("disable_radix_cache", False)}
            out[key] = _SGLANG_DERIVED[key](derived_args)
        else:
            out[key] = args[table[key].dest]
    if engine == "simengine" and args.get("disable_radix_cache") is True:
        out["prefix_caching"] = False
    return out


def from_neutral(engine: str, params: Mapping[str, Value]) -> dict[str, Value]:
    """An engine's own {dest: value} for the given neutral params (None and AUTO values left out)."""
    table = _check_engine(engine)
    unknown = sorted(set(params) - set(NEUTRAL_PARAMS))
    if unknown:
        raise ValueError(f"unknown parameter {unknown[0]!r}; choose from {', '.join(NEUTRAL_PARAMS)}")
    out: dict[str, Value] = {}
    for key, value in params.items():
        if value is None or value == AUTO:
            continue
        if engine == "sglang" and key == "prefix_caching":
            out["disable_radix_cache"] = not value
        elif engine == "sglang" and key == "chunked_prefill":
            if value is False:
                out["chunked_prefill_size"] = -1
        elif key in table:
            out[table[key].dest] = value
    return out


def to_cmdline(engine: str, params: Mapping[str, Value]) -> list[str]:
    """Command-line flags (engine's spelling) that set the given neutral params."""
    table = {flag.dest: flag for flag in _check_engine(engine).values()}
    argv: list[str] = []
    for dest, value in from_neutral(engine, params).items():
        flag = table[dest]
        if flag.kind is bool:
            if value:
                argv.append(flag.spellings[0])
            elif flag.negation:
                argv.append(flag.negation)
            continue
        argv += [flag.spellings[0], str(value)]
    return argv


def redacted_args(args: Mapping[str, Value]) -> dict[str, Any]:
    """Args with secrets (`api_key`, tokens) replaced, safe for manifests and logs."""
    return redact_mapping(args)
