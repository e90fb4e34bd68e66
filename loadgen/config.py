"""The resolved run configuration: YAML file < environment (`LOADGEN_*`) < command-line flags.

Nothing below the CLI reads `os.environ`; the CLI passes the environment mapping in here.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from infergauge.engines import ENGINES
from infergauge.redact import redact_url
from loadgen.workload.distributions import SpecError, parse_length
from loadgen.workload.traffic_config import TrafficConfig, traffic_from_mapping

if TYPE_CHECKING:
    import yaml

NO_EXPORTER = "none"  # --exporter-url none: attach no exporter (its facts are recorded as missing)

# `--target`: every real engine of the registry (their presets), any OpenAI server, the embedded sim


def target_names() -> tuple[str, ...]:
    """The valid `--target` names, read from the engine registry now: every engine that is not a
    simulator (registry order), then `openai` (any server at --base-url) and `sim` (embedded)."""
    return (*(name for name, spec in ENGINES.items() if not spec.plays), "openai", "sim")


ENDPOINTS = ("completions", "chat")
WORKLOADS = ("random", "random-text", "shared-prefix", "jsonl")
ARRIVALS = ("poisson", "constant", "gamma")
PROFILES: dict[str, tuple[int, int]] = {"short": (64, 64), "medium": (512, 256), "long": (2048, 512)}
SECRET_FIELDS = ("api_key", "grafana_token")
SLO_KEYS = ("ttft", "tpot", "e2e")
DEFAULT_NUM_PROMPTS = 1000
HTTP_CLIENTS = ("aiohttp", "raw")


class ConfigError(ValueError):
    """Bad user input (flag, YAML key, env value): one line naming the value and the valid choices."""


@dataclass(frozen=True)
class RunConfig:
    """Everything one benchmark run needs; built with `dataclasses.replace` for variants."""

    target: str = "sim"
    base_url: str | None = None
    model: str | None = None
    endpoint: str = "completions"
    api_key: str | None = field(default=None, repr=False)
    seed: int = 42
    workload: str | None = None
    dataset: str | None = None
    input_len: str | None = None
    output_len: str | None = None
    profile: str | None = None
    shared_prefix_len: int = 256
    shared_prefix_groups: int = 4
    ignore_eos: bool = True
    rate: float = math.inf
    arrival: str = "poisson"
    burstiness: float = 1.0
    max_concurrency: int | None = None
    num_prompts: int | None = None
    duration_s: float | None = None
    warmup: int = 0
    slo: dict[str, float] = field(default_factory=dict)
    request_timeout_s: float = 600.0
    max_error_rate: float = 0.1
    metrics_port: int = 9403
    metrics_listen_address: str = "127.0.0.1"  # loopback unless asked (docs/security.md)
    linger_s: float = 15.0
    results_dir: str = "results"
    scenario: str | None = None
    experiment_id: str | None = None
    exporter_url: str | None = None  # None: try the default exporter; NO_EXPORTER: attach none
    sim_args: tuple[str, ...] = ()
    grafana_url: str | None = None
    grafana_token: str | None = field(default=None, repr=False)
    extra_manifest: dict[str, Any] = field(default_factory=dict)
    http_client: str = "raw"  # the load's transport: loadgen.transport.rawhttp, or aiohttp
    traffic: TrafficConfig | None = None  # trace replay, sessions, ShareGPT files (docs/workloads.md)

    def __post_init__(self) -> None:
        validate(self)

    @property
    def resolved_workload(self) -> str:
        """The workload name, defaulting to token ids for completions and text for chat (`trace`,
        `sessions` or `sharegpt` under the traffic options)."""
        if self.traffic is not None and self.traffic.kind != "none":
            return self.traffic.kind
        if self.workload:
            return self.workload
        if self.dataset:
            return "jsonl"
        return "random-text" if self.endpoint == "chat" else "random"

    @property
    def lengths(self) -> tuple[str, str]:
        """(input, output) length specs: explicit flags win over the profile (default medium)."""
        prof_in, prof_out = PROFILES[self.profile or "medium"]
        spec_in, spec_out = self.input_len or f"fixed:{prof_in}", self.output_len or f"fixed:{prof_out}"
        return (str(parse_length(spec_in)), str(parse_length(spec_out)))

    @property
    def resolved_scenario(self) -> str:
        """The `scenario` label: as given, else `<workload>-<profile or custom>`."""
        if self.scenario:
            return self.scenario
        custom = self.input_len or self.output_len
        return f"{self.resolved_workload}-{'custom' if custom else (self.profile or 'medium')}"

    @property
    def total_requests(self) -> int | None:
        """Requests to send including warmup; None when only a duration bounds the run."""
        if self.num_prompts is None and self.duration_s is not None:
            return None
        return (self.num_prompts or DEFAULT_NUM_PROMPTS) + self.warmup

    def to_manifest(self) -> dict[str, Any]:
        """The resolved configuration with secrets removed (presence is kept as a boolean)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name in SECRET_FIELDS:
                out[f"{f.name}_set"] = value is not None
                continue
            if isinstance(value, float) and math.isinf(value):
                value = "inf"
            elif isinstance(value, tuple):
                value = list(value)
            elif isinstance(value, TrafficConfig):
                value = value.to_manifest()
            out[f.name] = value
        out["workload"] = self.resolved_workload
        out["input_len"], out["output_len"] = self.lengths
        out["scenario"] = self.resolved_scenario
        return out


def _choice(name: str, value: str | None, choices: Sequence[str]) -> None:
    if value is not None and value not in choices:
        raise ConfigError(f"invalid {name} {value!r}; choose from {', '.join(choices)}")


def _positive(name: str, value: float | None, *, allow_zero: bool = False) -> None:
    if value is None:
        return
    if isinstance(value, float) and math.isnan(value):
        raise ConfigError(f"invalid {name} {value!r}: must be a number")
    if value < 0 or (value == 0 and not allow_zero):
        raise ConfigError(f"invalid {name} {value!r}: must be {'>= 0' if allow_zero else '> 0'}")


def validate(config: RunConfig) -> None:
    """Raise ConfigError for the first invalid field; called on construction."""
    _choice("target", config.target, target_names())
    _choice("endpoint", config.endpoint, ENDPOINTS)
    _choice("workload", config.workload, WORKLOADS)
    _choice("arrival", config.arrival, ARRIVALS)
    _choice("profile", config.profile, tuple(PROFILES))
    _choice("http_client", config.http_client, HTTP_CLIENTS)
    for name in ("rate", "burstiness"):
        _positive(name, getattr(config, name))
    for name in ("request_timeout_s", "duration_s"):
        if getattr(config, name) is not None:
            _finite_positive(name, getattr(config, name), getattr(config, name))
    for name in ("max_concurrency", "num_prompts", "shared_prefix_len", "shared_prefix_groups"):
        _positive(name, getattr(config, name))
    for name in ("warmup", "linger_s", "metrics_port"):
        _positive(name, getattr(config, name), allow_zero=True)
    if not 0 <= config.max_error_rate <= 1:
        raise ConfigError(f"invalid max_error_rate {config.max_error_rate!r}: must be between 0 and 1")
    if config.metrics_port > 65535:
        raise ConfigError(f"invalid metrics_port {config.metrics_port!r}: must be 0-65535")
    _validate_combinations(config)
    if config.traffic is not None:
        from loadgen.workload.traffic import check_traffic  # it imports this module

        check_traffic(config.traffic, config.endpoint)
        if config.traffic.kind != "none" and (config.workload or config.dataset):
            given = "--workload" if config.workload else "--dataset"
            raise ConfigError(f"--{config.traffic.kind} and {given} are two workloads: give one")


def _validate_combinations(config: RunConfig) -> None:
    if config.target == "openai" and not config.base_url:
        raise ConfigError("target 'openai' needs --base-url (e.g. http://127.0.0.1:8000)")
    if config.base_url:
        _check_base_url(config.base_url)
        if config.api_key and urlsplit(config.base_url).username is not None:
            raise ConfigError(  # two Authorization headers: basic from the URL, bearer from the key
                f"invalid base_url {redact_url(config.base_url)!r}: it carries user:password@ and "
                "--api-key (or OPENAI_API_KEY) is set too; give one of them"
            )
    exporter = config.exporter_url
    if exporter and exporter != NO_EXPORTER and not exporter.startswith(("http://", "https://")):
        raise ConfigError(
            f"invalid exporter_url {redact_url(exporter)!r}: "
            f"must start with http:// or https:// (or be '{NO_EXPORTER}')"
        )
    if config.resolved_workload == "jsonl" and not config.dataset:
        raise ConfigError("workload 'jsonl' needs --dataset FILE.jsonl")
    if config.resolved_workload == "random" and config.endpoint == "chat":
        raise ConfigError(
            "workload 'random' sends token ids, which chat cannot take; use --workload random-text"
        )
    own_schedule = config.traffic is not None and config.traffic.kind in ("trace", "sessions")
    bounded = config.max_concurrency or own_schedule
    if math.isinf(config.rate) and config.total_requests is None and not bounded:
        raise ConfigError("rate 'inf' with only --duration needs --max-concurrency (or give --num-prompts)")
    for spec in (config.input_len, config.output_len):
        if spec is not None:
            try:
                parse_length(spec)
            except SpecError as exc:
                raise ConfigError(str(exc)) from None
    for key in config.slo:
        _choice("slo key", key, tuple(f"{k}_s" for k in SLO_KEYS))


def _check_base_url(url: str) -> None:
    """http(s)://HOST[:PORT] with a port in 1-65535 (a bad port is named, not reported as unreachable)."""
    if not url.startswith(("http://", "https://")):
        raise ConfigError(f"invalid base_url {url!r}: must start with http:// or https://")
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # `http://[::1` (an unclosed IPv6 bracket)
        raise ConfigError(f"invalid base_url {redact_url(url)!r}: {exc}") from None
    if not parts.hostname:
        raise ConfigError(f"invalid base_url {url!r}: no host")
    try:
        port = parts.port
    except ValueError:
        raise ConfigError(
            f"invalid base_url {url!r}: port {parts.netloc.rpartition(':')[2]!r} is not a number in 1-65535"
        ) from None
    if port == 0:
        raise ConfigError(f"invalid base_url {url!r}: port 0 is not a number in 1-65535")


def strip_api_suffix(url: str) -> tuple[str, str | None]:
    """(`http://h:p`, a note) for `http://h:p/v1[/]`: loadgen adds `/v1/...` itself; (url, None) otherwise."""
    trimmed = url.rstrip("/")
    if trimmed.endswith("/v1"):
        base = trimmed[: -len("/v1")]
        return base, f"info: base URL {url!r} ends in /v1; using {base!r} (loadgen adds /v1/... itself)"
    return trimmed, None


def parse_duration(text: str, what: str = "duration") -> float:
    """Seconds from `200ms`, `2s`, `1.5`, `500us`, `1m`; raises ConfigError naming the value."""
    raw = text.strip().lower()
    for suffix, scale in (("ms", 1e-3), ("us", 1e-6), ("s", 1.0), ("m", 60.0)):
        if raw.endswith(suffix):
            number, mult = raw[: -len(suffix)], scale
            break
    else:
        number, mult = raw, 1.0
    try:
        value = float(number) * mult
    except ValueError:
        raise ConfigError(
            f"invalid {what} {text!r}: expected a number with ms, s or m (e.g. 200ms)"
        ) from None
    _finite_positive(what, value, text)
    return value


def _finite_positive(what: str, value: float, shown: object) -> None:
    """A duration is a finite number of seconds > 0; `inf` and `nan` get their own message."""
    if not math.isfinite(value):
        raise ConfigError(f"invalid {what} {shown!r}: not a finite time; give e.g. 30s, or leave it out")
    if value <= 0:
        raise ConfigError(f"invalid {what} {shown!r}: must be > 0")


def parse_slo(text: str | Mapping[str, Any] | None) -> dict[str, float]:
    """`ttft=200ms,tpot=50ms,e2e=2s` (or a YAML mapping) -> {"ttft_s": 0.2, ...}."""
    if not text:
        return {}
    items = text.items() if isinstance(text, Mapping) else (p.partition("=")[::2] for p in text.split(","))
    out: dict[str, float] = {}
    for key, value in items:
        name = str(key).strip().removesuffix("_s")
        if name not in SLO_KEYS:
            raise ConfigError(f"invalid slo key {name!r}; choose from {', '.join(SLO_KEYS)}")
        out[f"{name}_s"] = parse_duration(str(value), f"slo {name}")
    return out


def parse_rate(text: str | float) -> float:
    """Requests per second; `inf` means send everything at once."""
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise ConfigError(f"invalid rate {text!r}: expected a number of requests/s or 'inf'") from None
    if math.isnan(value) or value <= 0:
        raise ConfigError(f"invalid rate {text!r}: must be > 0 (or 'inf')")
    return value


FIELD_NAMES = {f.name for f in dataclasses.fields(RunConfig)}
ALIASES = {"duration": "duration_s", "request_timeout": "request_timeout_s", "linger": "linger_s"}


def _traffic(value: Any) -> TrafficConfig:
    """A YAML `traffic:` mapping -> TrafficConfig (one line naming a bad key or value)."""
    if not isinstance(value, Mapping):
        raise ConfigError(f"invalid traffic {value!r}: expected a mapping (trace: FILE, sessions: ...)")
    try:
        return traffic_from_mapping(dict(value))
    except (KeyError, TypeError) as exc:
        raise ConfigError(str(exc).strip("'\"")) from None


def _coerce(name: str, value: Any) -> Any:
    """Turn a YAML/env value into the field's type (strings from the environment included)."""
    if value is None:
        return None
    if name == "slo":
        return parse_slo(value)
    if name == "rate":
        return parse_rate(value)
    if name in ("duration_s", "request_timeout_s", "linger_s") and isinstance(value, str):
        return parse_duration(value, name)
    if name == "traffic":
        return _traffic(value)
    if name == "sim_args":
        return tuple(str(v) for v in (value.split() if isinstance(value, str) else value))
    default = RunConfig.__dataclass_fields__[name].default
    probe = default if default is not None and default is not dataclasses.MISSING else None
    try:
        if (
            name in ("max_concurrency", "num_prompts")
            or isinstance(probe, int)
            and not isinstance(probe, bool)
        ):
            return int(value)
        if isinstance(probe, float):
            return float(value)
        if isinstance(probe, bool):
            return value if isinstance(value, bool) else str(value).lower() in ("1", "true", "yes", "on")
    except (TypeError, ValueError):
        raise ConfigError(f"invalid {name} {value!r}: expected a number") from None
    return value


def normalise_keys(raw: Mapping[str, Any], source: str) -> dict[str, Any]:
    """Map `input-len`/`input_len`/aliases to field names; unknown keys are an error."""
    out: dict[str, Any] = {}
    for key, value in raw.items():
        name = str(key).replace("-", "_").lower()
        name = ALIASES.get(name, name)
        if name not in FIELD_NAMES:
            raise ConfigError(
                f"unknown key {key!r} in {source}; valid keys: {', '.join(sorted(FIELD_NAMES))}"
            )
        out[name] = _coerce(name, value)
    return out


def load_yaml(path: str | Path) -> dict[str, Any]:
    """Read a run.yaml mapping of RunConfig fields."""
    import yaml  # only with a config file: not on every run's start-up path

    try:
        text = Path(path).read_text()
        data, lines = yaml.safe_load(text), _key_lines(text)
    except OSError as exc:
        raise ConfigError(f"cannot read config {str(path)!r}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(yaml_error(str(path), exc)) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"invalid config {str(path)!r}: expected a mapping of options")
    out: dict[str, Any] = {}
    for key, value in data.items():
        try:
            out.update(normalise_keys({key: value}, "the config file"))
        except ConfigError as exc:
            raise ConfigError(f"{path}:{lines.get(str(key), 1)}: {exc}") from None
    return out


def _key_lines(text: str) -> dict[str, int]:
    """Top-level key -> its 1-based line in a YAML mapping document."""
    import yaml

    root = yaml.compose(text, Loader=yaml.SafeLoader)
    if not isinstance(root, yaml.MappingNode):
        return {}
    return {str(k.value): k.start_mark.line + 1 for k, _ in root.value}


def yaml_error(path: str, exc: yaml.YAMLError) -> str:
    """`run.yaml:3:7: invalid YAML (mapping values are not allowed here)`: where and what, one line."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else path
    return f"{where}: invalid YAML ({problem})"


# LOADGEN_* names that are process switches read where they act, not run settings: LOADGEN_NATIVE=0
# keeps the C modules off (loadgen.transport.kernel_stamps, sse)
PROCESS_SWITCHES = frozenset({"LOADGEN_NATIVE"})


def env_overrides(environ: Mapping[str, str]) -> dict[str, Any]:
    """`LOADGEN_RATE=10` -> {"rate": 10.0}; unknown LOADGEN_* names are an error (the process
    switches of PROCESS_SWITCHES are not run settings and are left to what reads them)."""
    picked = {
        k[len("LOADGEN_") :]: v
        for k, v in environ.items()
        if k.startswith("LOADGEN_") and k not in PROCESS_SWITCHES
    }
    return normalise_keys(picked, "environment (LOADGEN_*)")


def resolve(
    yaml_values: Mapping[str, Any], env_values: Mapping[str, Any], flags: Mapping[str, Any]
) -> RunConfig:
    """Merge the sources (later wins) into a validated RunConfig."""
    merged = {**yaml_values, **env_values, **{k: v for k, v in flags.items() if v is not None}}
    try:
        return RunConfig(**merged)
    except TypeError as exc:
        raise ConfigError(str(exc)) from None
