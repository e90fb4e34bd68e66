"""Command-line configuration of the simulated engine: one frozen `SimConfig`, vLLM and SGLang spellings.

A real engine launch line runs unchanged apart from the program name: each engine's own flag names map
onto one field (`--max-num-seqs` / `--max-running-requests`, `--tensor-parallel-size` / `--tp-size`, ...).
Flags the simulator does not model are accepted and kept in `SimConfig.extra_args`, never fatal.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from infergauge.redact import REDACTED, redact_mapping
from simengine.gpu import DTYPE_BYTES, GPU_PROFILES, INTERCONNECTS, default_kv_cache_tokens
from simengine.personalities import catalog

PERSONALITIES = catalog.NAMES
DEFAULT_MODEL = "sim-llama-8b"
DEV_MODE_ENV = "VLLM_SERVER_DEV_MODE"  # vLLM serves /server_info, /reset_prefix_cache only when set to 1


class ConfigError(ValueError):
    """A bad flag or value; the message is one line naming the bad value and the valid choices."""


@dataclass(frozen=True)
class SimConfig:
    """The resolved configuration of one simulated engine."""

    personality: str = catalog.DEFAULT
    host: str = "127.0.0.1"
    port: int = 8000
    model: str = DEFAULT_MODEL
    served_model_name: str = DEFAULT_MODEL
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 8192
    max_model_len: int = 8192
    block_size: int = 16
    kv_cache_tokens: int = 0  # resolved from the GPU profile when 0 was given
    gpu_memory_utilization: float = 0.9
    enable_chunked_prefill: bool = True
    enable_prefix_caching: bool = True
    # usage.prompt_tokens_details.cached_tokens in responses: vLLM --enable-prompt-tokens-details,
    # SGLang --enable-cache-report (both off by default, as in the real engines)
    enable_prompt_tokens_details: bool = False
    tensor_parallel_size: int = 1
    gpu: str = "h200"
    model_params: float = 8e9
    dtype: str = "bf16"
    interconnect: str = "nvlink"
    step_overhead_ms: float = 1.0
    time_scale: float = 1.0
    speed_factor: float = 1.0  # multiplies every step's duration: 1.15 = 15% slower TPOT
    seed: int = 0
    eos_mean_tokens: float = 256.0
    ground_truth: str | None = None
    ground_truth_tokens: bool = False
    fault_error_rate: float = 0.0
    fault_stall_ms: float = 0.0
    fault_stall_rate: float = 1.0  # share of streams that stall when --fault-stall-ms > 0
    fault_disconnect_rate: float = 0.0
    fault_malformed_rate: float = 0.0
    api_key: tuple[str, ...] | None = field(default=None, repr=False)  # vLLM: any one of these keys
    engine_version: str = ""
    dev_mode: bool = False  # vLLM's VLLM_SERVER_DEV_MODE=1: the dev-only endpoints answer
    extra_args: dict[str, Any] = field(default_factory=dict)

    def effective_args(self) -> dict[str, Any]:
        """The configuration as a plain dict, secrets redacted (safe for logs, manifests, server info)."""
        out = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "api_key"}
        out["api_key"] = None if self.api_key is None else REDACTED
        out["extra_args"] = redact_mapping(self.extra_args)  # unknown flags: `--hf-token=...` too
        return out


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse calls this on bad input; make it one line
        raise ConfigError(message.replace("\n", " "))


def _flag(p: _Parser, names: list[str], dest: str, **kw: Any) -> None:
    p.add_argument(*names, dest=dest, default=None, **kw)


def _truth(value: str) -> bool:
    """vLLM's older optional-value booleans: `--enable-chunked-prefill=False`."""
    lowered = value.lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"invalid boolean {value!r}; choose from true, false")


def _bool(p: _Parser, on: list[str], off: list[str], dest: str) -> None:
    p.add_argument(*on, dest=dest, nargs="?", const=True, type=_truth, default=None)
    p.add_argument(*off, dest=dest, action="store_const", const=False, default=None)


def _build_parser() -> _Parser:
    p = _Parser(prog="simengine", allow_abbrev=False, add_help=False)
    _flag(p, ["--personality"], "personality")
    _flag(p, ["--host"], "host")
    _flag(p, ["--port"], "port", type=int)
    _flag(p, ["--model", "--model-path"], "model")
    _flag(p, ["--served-model-name"], "served_model_name", nargs="+")
    _flag(p, ["--max-num-seqs", "--max-running-requests"], "max_num_seqs", type=int)
    _flag(p, ["--max-num-batched-tokens", "--chunked-prefill-size"], "max_num_batched_tokens", type=int)
    _flag(p, ["--max-model-len", "--context-length"], "max_model_len", type=int)
    _flag(p, ["--block-size", "--page-size"], "block_size", type=int)
    _flag(p, ["--kv-cache-tokens", "--max-total-tokens"], "kv_cache_tokens", type=int)
    _flag(p, ["--gpu-memory-utilization", "--mem-fraction-static"], "gpu_memory_utilization", type=float)
    _flag(p, ["--tensor-parallel-size", "--tp-size", "--tp", "-tp"], "tensor_parallel_size", type=int)
    _bool(p, ["--enable-chunked-prefill"], ["--no-enable-chunked-prefill"], "enable_chunked_prefill")
    _bool(
        p,
        ["--enable-prefix-caching"],
        ["--no-enable-prefix-caching", "--disable-radix-cache"],
        "enable_prefix_caching",
    )
    _bool(
        p,
        ["--enable-prompt-tokens-details", "--enable-cache-report"],
        ["--no-enable-prompt-tokens-details"],
        "enable_prompt_tokens_details",
    )
    _flag(p, ["--gpu"], "gpu")
    _flag(p, ["--model-params"], "model_params", type=float)
    _flag(p, ["--dtype"], "dtype")
    _flag(p, ["--interconnect"], "interconnect")
    _flag(p, ["--step-overhead-ms"], "step_overhead_ms", type=float)
    _flag(p, ["--time-scale"], "time_scale", type=float)
    _flag(p, ["--speed-factor"], "speed_factor", type=float)
    _flag(p, ["--seed", "--random-seed"], "seed", type=int)
    _flag(p, ["--eos-mean-tokens"], "eos_mean_tokens", type=float)
    _flag(p, ["--ground-truth"], "ground_truth")
    _bool(p, ["--ground-truth-tokens"], ["--no-ground-truth-tokens"], "ground_truth_tokens")
    for name in ("error-rate", "stall-ms", "stall-rate", "disconnect-rate", "malformed-rate"):
        _flag(p, [f"--fault-{name}"], "fault_" + name.replace("-", "_"), type=float)
    _flag(p, ["--api-key"], "api_key", nargs="+")  # vLLM takes several; a second is not an error
    _flag(p, ["--version", "--engine-version"], "engine_version")
    _bool(p, ["--dev-mode"], ["--no-dev-mode"], "dev_mode")
    return p


FLAG_PARSER = _build_parser()


def _split_positional(argv: list[str]) -> tuple[list[str], str | None]:
    """`vllm serve MODEL ...` form: drop a leading `serve`, take a leading bare word as the model."""
    args = list(argv)
    if args and args[0] == "serve":
        args.pop(0)
    if args and not args[0].startswith("-"):
        return args[1:], args[0]
    return args, None


def _collect_unknown(unknown: list[str]) -> dict[str, Any]:
    """Unknown engine flags are recorded (`--flag value` or `--flag` -> True), not fatal."""
    extra: dict[str, Any] = {}
    i = 0
    while i < len(unknown):
        tok = unknown[i]
        if not tok.startswith("-"):
            raise ConfigError(f"unexpected argument {tok!r} (flags start with --)")
        if "=" in tok:
            key, value = tok.split("=", 1)
            extra[key.lstrip("-")] = value
            i += 1
            continue
        values: list[str] = []
        while i + 1 < len(unknown) and not unknown[i + 1].startswith("--"):
            values.append(unknown[i + 1])
            i += 1
        extra[tok.lstrip("-")] = True if not values else (values[0] if len(values) == 1 else values)
        i += 1
    return extra


def dev_mode_from_env(environ: Mapping[str, str]) -> bool | None:
    """`VLLM_SERVER_DEV_MODE` read as vLLM does (`bool(int(value))`); None when it is not set."""
    value = environ.get(DEV_MODE_ENV)
    if value is None:
        return None
    try:
        return bool(int(value))
    except ValueError:
        raise ConfigError(f"invalid {DEV_MODE_ENV} {value!r}; must be an integer (1 = dev mode)") from None


def parse_args(argv: list[str], environ: Mapping[str, str] | None = None) -> SimConfig:
    """Parse a launch line (vLLM or SGLang spellings) into a validated `SimConfig`.

    `environ` is the engine's environment as the CLI read it (only `VLLM_SERVER_DEV_MODE` is used;
    `--dev-mode` / `--no-dev-mode` win over it). Raises `ConfigError` with a one-line message naming
    the bad value and the valid choices.
    """
    rest, positional_model = _split_positional(argv)
    ns, unknown = FLAG_PARSER.parse_known_args(rest)
    given = {k: v for k, v in vars(ns).items() if v is not None}
    env_dev_mode = dev_mode_from_env(environ or {})
    if env_dev_mode is not None:
        given.setdefault("dev_mode", env_dev_mode)
    if "api_key" in given:
        given["api_key"] = tuple(given["api_key"])
    if positional_model and "model" not in given:
        given["model"] = positional_model
    personality = given.get("personality", catalog.DEFAULT)
    _check_choice("--personality", personality, PERSONALITIES)
    given.setdefault("port", catalog.default_port(personality))
    starts_with = catalog.STARTS_WITH[personality]
    given.setdefault("block_size", starts_with.get("block_size", SimConfig.block_size))
    model = given.get("model", DEFAULT_MODEL)
    served = given.pop("served_model_name", None)
    given["served_model_name"] = served[0] if served else model
    given["extra_args"] = _collect_unknown(unknown)
    if given.get("max_num_batched_tokens") == -1:  # SGLang: --chunked-prefill-size -1 disables chunking
        given["enable_chunked_prefill"] = False
        given["max_num_batched_tokens"] = max(16384, given.get("max_model_len", 8192))
    cfg = SimConfig(**given)
    _validate(cfg)
    if cfg.kv_cache_tokens == 0:
        cfg = _replace(
            cfg,
            kv_cache_tokens=default_kv_cache_tokens(
                cfg.gpu, cfg.model_params, cfg.dtype, cfg.tensor_parallel_size, cfg.gpu_memory_utilization
            ),
        )
    if cfg.kv_cache_tokens < cfg.max_model_len:  # vLLM refuses to start in this case too
        raise ConfigError(
            f"--max-model-len {cfg.max_model_len} does not fit the KV cache ({cfg.kv_cache_tokens} tokens "
            f"for {cfg.model_params:.3g} parameters on {cfg.tensor_parallel_size}x {cfg.gpu} at "
            f"--gpu-memory-utilization {cfg.gpu_memory_utilization}); lower --max-model-len or give the "
            "cache more memory"
        )
    if not cfg.engine_version:
        cfg = _replace(cfg, engine_version=starts_with["engine_version"])
    return cfg


def _replace(cfg: SimConfig, **changes: Any) -> SimConfig:
    import dataclasses

    return dataclasses.replace(cfg, **changes)


def _check_choice(flag: str, value: str, choices: tuple[str, ...] | list[str]) -> None:
    if value not in choices:
        raise ConfigError(f"invalid {flag} {value!r}; choose from {', '.join(choices)}")


def _check_range(flag: str, value: float, lo: float, hi: float | None = None, *, above: bool = False) -> None:
    """Reject NaN, infinities and values outside [lo, hi] (or <= lo with `above`), naming flag and value."""
    inside = value > lo if above else value >= lo
    if not (math.isfinite(value) and inside and (hi is None or value <= hi)):
        bound = f"between {lo} and {hi}" if hi is not None else f"{'>' if above else '>='} {lo}"
        raise ConfigError(f"invalid {flag} {value!r}; must be a finite number {bound}")


# flag -> (field, lowest, highest); every float flag is here, so NaN and infinities never pass
RANGES: dict[str, tuple[str, float, float | None]] = {
    "--port": ("port", 0, 65535),
    "--max-num-seqs": ("max_num_seqs", 1, None),
    "--max-num-batched-tokens": ("max_num_batched_tokens", 1, None),
    "--max-model-len": ("max_model_len", 16, None),
    "--block-size": ("block_size", 1, 1024),
    "--kv-cache-tokens": ("kv_cache_tokens", 0, None),
    "--gpu-memory-utilization": ("gpu_memory_utilization", 0.01, 1.0),
    "--tensor-parallel-size": ("tensor_parallel_size", 1, 64),
    "--model-params": ("model_params", 1e6, 1e13),
    "--eos-mean-tokens": ("eos_mean_tokens", 1.0, None),
    "--step-overhead-ms": ("step_overhead_ms", 0.0, None),  # durations: >= 0
    "--fault-stall-ms": ("fault_stall_ms", 0.0, None),
    "--fault-error-rate": ("fault_error_rate", 0.0, 1.0),  # rates and probabilities: [0, 1]
    "--fault-stall-rate": ("fault_stall_rate", 0.0, 1.0),
    "--fault-disconnect-rate": ("fault_disconnect_rate", 0.0, 1.0),
    "--fault-malformed-rate": ("fault_malformed_rate", 0.0, 1.0),
}
POSITIVE = {"--time-scale": "time_scale", "--speed-factor": "speed_factor"}  # factors: > 0


def _validate(cfg: SimConfig) -> None:
    _check_choice("--gpu", cfg.gpu, sorted(GPU_PROFILES))
    _check_choice("--dtype", cfg.dtype, sorted(DTYPE_BYTES))
    _check_choice("--interconnect", cfg.interconnect, INTERCONNECTS)
    if (
        cfg.interconnect == "nvlink"
        and GPU_PROFILES[cfg.gpu].nvlink_gbps == 0
        and cfg.tensor_parallel_size > 1
    ):
        raise ConfigError(f"invalid --interconnect 'nvlink' for --gpu {cfg.gpu} (no NVLink); choose pcie")
    for flag, (name, lo, hi) in RANGES.items():
        _check_range(flag, getattr(cfg, name), lo, hi)
    for flag, name in POSITIVE.items():
        _check_range(flag, getattr(cfg, name), 0.0, above=True)
