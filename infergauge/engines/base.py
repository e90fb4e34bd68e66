"""An inference engine described as data: flags, defaults, processes, endpoints, metric roles.

Everything engine-specific lives in one `EngineSpec` per engine file (`vllm.py`, `sglang.py`,
`simengine.py`); the code in `params.py`, `detect.py` and `resolve.py` reads these tables and has no
branch on an engine's name. Standard library only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from infergauge.engines.metrics import ROLES, Metric

Value = int | float | bool | str | None
AUTO = "auto"  # decided by the engine at start-up (from the GPU or the model)
MISSING = object()  # what `dig` returns for a field that is not there

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
# The value type of each neutral parameter (the flag's type in every engine).
NEUTRAL_KINDS: dict[str, type] = {
    "tensor_parallel_size": int,
    "max_num_seqs": int,
    "gpu_memory_utilization": float,
    "max_model_len": int,
    "block_size": int,
    "chunked_prefill": bool,
    "max_num_batched_tokens": int,
    "prefix_caching": bool,
    "kv_cache_dtype": str,
    "quantization": str,
    "dtype": str,
    "seed": int,
}
METRIC_ROLES: tuple[str, ...] = tuple(ROLES)  # the neutral roles (infergauge/engines/metrics.py)


@dataclass(frozen=True)
class Flag:
    """One engine argument standing for a neutral parameter: dest, spellings, type, special values."""

    dest: str
    spellings: tuple[str, ...]
    kind: type = str  # int | float | str | bool (a bool flag takes no value)
    negation: str | None = None  # e.g. vLLM's `--no-enable-prefix-caching`
    inverted: bool = False  # neutral = not value (SGLang's `--disable-radix-cache`)
    off: Value = None  # the value meaning "disabled": neutral None (SGLang `--chunked-prefill-size -1`)


def flag(dest: str, kind: type = str, *extra: str, **options: Any) -> Flag:
    """A Flag spelled `--dest-with-dashes` plus any extra spellings."""
    return Flag(dest, ("--" + dest.replace("_", "-"), *extra), kind, **options)


@dataclass(frozen=True)
class Switch:
    """A neutral boolean derived from another argument: False when that argument equals `off`."""

    dest: str
    off: Value


@dataclass(frozen=True)
class GpuDefault:
    """A default the engine picks from the GPU: `large` on GPUs with >= min_bytes (not `excluded`)."""

    large: Value
    small: Value
    min_bytes: int = 70 * 2**30
    excluded: tuple[str, ...] = ("a100",)


@dataclass(frozen=True)
class Marker:
    """A sign in a metadata body: the `field` (dotted, list indexes allowed) at `path`, equal to
    `equals` when given, else merely present."""

    path: str
    field: str
    equals: Value = None


@dataclass(frozen=True)
class ServerInfo:
    """How an engine reports its arguments over HTTP: which endpoints, and where in the body."""

    paths: tuple[str, ...] = ()
    nested: str | None = None  # a key holding the args as a dict (the simulated vLLM's `server_args`)
    config_string: str | None = None  # a key holding `k=v, k=v` text (vLLM's `vllm_config`)
    config_fields: Mapping[str, str] = field(default_factory=dict)  # config_string key -> arg dest
    version_key: str | None = None
    # arg dest -> dotted field (list indexes allowed) where the engine reports the value it decided,
    # used when the arg itself is None/auto (SGLang's `max_running_requests: null` ->
    # `internal_states.0.effective_max_running_requests_per_dp`)
    effective: Mapping[str, str] = field(default_factory=dict)


def dig(body: Any, dotted: str) -> Any:
    """The value at a dotted path (`a.0.b`: dict keys and list indexes) in a JSON body, else MISSING."""
    for part in dotted.split("."):
        if isinstance(body, Mapping) and part in body:
            body = body[part]
        elif isinstance(body, list) and part.isdigit() and int(part) < len(body):
            body = body[int(part)]
        else:
            return MISSING
    return body


@dataclass(frozen=True)
class InfoMetric:
    """An `_info` series on the engine's /metrics whose labels state values the engine decided
    (vLLM's `vllm:cache_config_info{block_size="16",gpu_memory_utilization="0.5",...}`)."""

    name: str
    labels: Mapping[str, str]  # label -> arg dest
    path: str = "/metrics"


@dataclass(frozen=True)
class EngineSpec:
    """Everything infergauge knows about one engine, as data."""

    name: str
    package: str  # distribution whose version is the engine's version
    default_port: int
    launch_prefixes: tuple[tuple[str, ...], ...] = ()  # program + subcommand, e.g. ("vllm", "serve")
    # `python -m MODULE [subcommand]`, e.g. "vllm.entrypoints.cli.main serve"
    launch_modules: tuple[str, ...] = ()
    launcher: tuple[str, ...] = ()  # how `loadgen align` writes a launch line for it
    model_flag: str | None = None  # the flag naming the model in that line (None: positional)
    counterpart: str | None = None  # the engine `loadgen align` translates to by default
    child_titles: tuple[str, ...] = ()  # setproctitle names of its GPU-holding children
    env_prefixes: tuple[str, ...] = ()
    flags: Mapping[str, Flag] = field(default_factory=dict)  # neutral name -> the engine's argument
    switches: Mapping[str, Switch] = field(default_factory=dict)  # neutral booleans derived from args
    defaults: Mapping[str, Value] = field(default_factory=dict)  # neutral name -> documented default
    gpu_defaults: Mapping[str, GpuDefault] = field(default_factory=dict)
    bool_flags: frozenset[str] = frozenset()  # other flags that take no value
    model_flags: tuple[str, ...] = ("model",)  # arg dests naming the model, first one wins
    model_config: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # neutral -> config.json keys
    markers: tuple[Marker, ...] = ()  # how to recognise its metadata bodies
    metadata_paths: tuple[str, ...] = ("/v1/models",)
    model_info_paths: tuple[str, ...] = ()
    server_info: ServerInfo = ServerInfo()
    version_path: str | None = None
    # a completions request field that makes the stream carry each chunk's token ids (None: none)
    answer_ids_field: str | None = None
    info_metric: InfoMetric | None = None
    readiness_path: str = "/health"  # 200 = ready to serve; any HTTP answer = answering
    readiness_timeout_s: float = 1.0  # how long its readiness answer may take when healthy
    startup_timeout_s: float = 120.0  # how long a launch may take to answer its readiness path
    flush_path: str | None = None  # POST endpoint that empties the prefix cache
    flush_needs: str | None = None  # what the flush needs to be served (e.g. an env var)
    metrics: Mapping[str, Metric] = field(default_factory=dict)  # role -> its metric (name, kind, unit)
    model_label: str | None = "model_name"  # the label naming the served model on its metrics
    # (hit role, queried role): counters of prompt tokens found in / looked up in the prefix cache
    cache_counters: tuple[str, str] | None = None
    plays: tuple[str, ...] = ()  # a simulator: the engines it can answer as (no target preset of its own)
    # neutral name -> why its flag is not an exact equivalent of another engine's (`loadgen align`)
    param_notes: Mapping[str, str] = field(default_factory=dict)
    display_name: str = ""  # how people write its name ("vLLM", "llama.cpp"); the name when empty
    ignore_eos: bool = True  # its completions honour `ignore_eos` (exact output lengths)

    @property
    def title(self) -> str:
        """The engine's name as people write it."""
        return self.display_name or self.name

    def metric(self, role: str) -> str | None:
        """The name of this engine's metric for a role (METRIC_ROLES), None when it has none."""
        found = self.metrics.get(role)
        return found.name if found is not None else None
