"""One resolution of an engine's effective parameters, from every place that states them.

    resolved = resolve(spec, cmdline=args, server_info=body, server_info_path="/server_info",
                       model_config=config, origin="exporter ")
    resolved.params["max_num_seqs"], resolved.param_sources["max_num_seqs"]  # 64, "exporter /proc cmdline"

Sources are tried in order: the launch command line (what the user set), the engine's HTTP server
info (what it runs with), the labels of its info metric on /metrics (vLLM's `vllm:cache_config_info`),
`/v1/models` (max_model_len), the model's config.json, then the engine's
documented default. A value of "auto" or None is skipped in favour of a later concrete one (vLLM
`--dtype auto` -> the model's bfloat16; SGLang's `seed: auto` -> its reported `random_seed`). Pure
functions over plain dicts.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from infergauge.engines.base import AUTO, NEUTRAL_PARAMS, EngineSpec, Value, dig
from infergauge.engines.params import arg_value, default_value, stated

CMDLINE = "/proc cmdline"
MODEL_CONFIG = "model config.json"
MODELS = "engine HTTP /v1/models"
DEFAULT = "default"
# Neither the launch line nor a full server info was read (vLLM without exporter or dev mode): a
# parameter nothing stated is unknown, not the engine's default (the user may have set it).
UNKNOWN = "unknown (launch flags not read: no exporter, no server info)"


@dataclass(frozen=True)
class Evidence:
    """Neutral values one source states, and how to name that source."""

    label: str
    params: Mapping[str, Value] = field(default_factory=dict)


@dataclass(frozen=True)
class Resolved:
    """Effective neutral parameters and, for each, the source it came from."""

    params: dict[str, Value]
    param_sources: dict[str, str]


def _scalar(text: str) -> Value:
    """`True` / `None` / `2048` / `torch.bfloat16` from a Python repr -> a plain value."""
    table: dict[str, Value] = {"True": True, "False": False, "None": None}
    if text in table:
        return table[text]
    try:
        return int(text)
    except ValueError:
        return text.removeprefix("torch.").strip("'")


def parse_config_string(text: str, fields: Mapping[str, str]) -> dict[str, Value]:
    """Top-level `key=value` fields of a config repr (vLLM's `vllm_config`) mapped to arg dests."""
    out: dict[str, Value] = {}
    for match in re.finditer(r"(?:^|, )(\w+)=([^,]*)", text):
        key, value = match.group(1), match.group(2).strip()
        if key in fields and fields[key] not in out:
            out[fields[key]] = _scalar(value)
    return out


def _flat(body: Mapping[str, Any]) -> dict[str, Value]:
    return {k: v for k, v in body.items() if isinstance(v, int | float | str | bool) or v is None}


def server_args(spec: EngineSpec, body: Any) -> dict[str, Value]:
    """The engine's arguments (its own spelling) in a server-info body: flat scalars, a nested args
    dict, or a `k=v` config string, as the spec says."""
    if not isinstance(body, Mapping):
        return {}
    info = spec.server_info
    args = _flat(body)
    if info.config_string and isinstance(body.get(info.config_string), str):
        args.update(parse_config_string(body[info.config_string], info.config_fields))
    if info.nested and isinstance(body.get(info.nested), Mapping):
        args.update(_flat(body[info.nested]))
    for dest, path in info.effective.items():
        decided = dig(body, path)
        if not _concrete(args.get(dest)) and isinstance(decided, int | float | str | bool):
            args[dest] = decided
    return args


_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def info_metric_args(spec: EngineSpec, text: str) -> dict[str, Value]:
    """The engine's arguments (its own spelling) stated by its info metric's labels in a /metrics
    text, typed as the arguments are; {} when the engine has no info metric or the text lacks it."""
    metric = spec.info_metric
    if metric is None:
        return {}
    line = next((ln for ln in text.splitlines() if ln.startswith(metric.name + "{")), None)
    labels = dict(_LABEL.findall(line or ""))
    return {
        dest: arg_value(spec, dest, labels[label]) for label, dest in metric.labels.items() if label in labels
    }


def from_model_config(spec: EngineSpec, config: Mapping[str, Any] | None) -> dict[str, Value]:
    """Neutral values the model's config.json states (dtype, context length), per the spec's map."""
    out: dict[str, Value] = {}
    for key, names in spec.model_config.items():
        value = next((config[n] for n in names if config and config.get(n) is not None), None)
        if isinstance(value, int | float | str | bool):
            out[key] = value
    return out


def _concrete(value: Value) -> bool:
    return value is not None and not (isinstance(value, str) and value.lower() == AUTO)


def merge(
    spec: EngineSpec,
    evidence: Sequence[Evidence],
    *,
    gpu_memory_bytes: int | None = None,
    gpu_name: str = "",
    defaults_apply: bool = True,
) -> Resolved:
    """First concrete value per neutral param in `evidence` order (None = not stated), else the
    engine's default when that is concrete, else the first stated "auto", else the default; with
    `defaults_apply` False (the launch flags were not read) an unstated param is None, UNKNOWN."""
    params: dict[str, Value] = {}
    sources: dict[str, str] = {}
    for key in NEUTRAL_PARAMS:
        default = default_value(spec, key, gpu_memory_bytes, gpu_name)
        stating = [(e.label, e.params[key]) for e in evidence if e.params.get(key) is not None]
        concrete = [pair for pair in stating if _concrete(pair[1])]
        if concrete:
            chosen = concrete[0]
        elif not defaults_apply:
            chosen = (UNKNOWN, None)
        elif stating and not _concrete(default):
            chosen = stating[0]  # the launch line said "auto" and the engine reported nothing better
        else:
            chosen = (DEFAULT, default)
        sources[key], params[key] = chosen
    return Resolved(params, sources)


def resolve(
    spec: EngineSpec,
    *,
    cmdline: Mapping[str, Value] | None = None,
    server_info: Any = None,
    server_info_path: str = "",
    max_model_len: int | None = None,
    reported: Mapping[str, Value] | None = None,
    model_config: Mapping[str, Any] | None = None,
    server_spec: EngineSpec | None = None,
    origin: str = "",
    cmdline_label: str | None = None,
    gpu_memory_bytes: int | None = None,
    gpu_name: str = "",
) -> Resolved:
    """Merge what the launch line, the server info, the info metric's labels (`reported`, from
    `info_metric_args`), /v1/models and the model config say (that order).

    `server_spec` is the engine the HTTP bodies speak for, when it is not `spec` (the simulated engine
    answers in its personality's spelling); `origin` prefixes the labels of what the exporter read
    on the host (e.g. "exporter "); `cmdline_label` names a command line read elsewhere.
    """
    evidence = [Evidence(cmdline_label or origin + CMDLINE, stated(spec, cmdline or {}))]  # None: not read
    if server_info is not None:
        speaker = server_spec or spec
        said = stated(speaker, server_args(speaker, server_info))
        evidence.append(Evidence(f"engine HTTP {server_info_path}".strip(), said))
    speaker = server_spec or spec
    if reported and speaker.info_metric is not None:
        label = f"engine HTTP {speaker.info_metric.path} {speaker.info_metric.name}"
        evidence.append(Evidence(label, stated(speaker, reported)))
    if max_model_len is not None:
        evidence.append(Evidence(MODELS, {"max_model_len": max_model_len}))
    evidence.append(Evidence(origin + MODEL_CONFIG, from_model_config(spec, model_config)))
    flags_read = cmdline is not None or server_info is not None
    return merge(
        spec, evidence, gpu_memory_bytes=gpu_memory_bytes, gpu_name=gpu_name, defaults_apply=flags_read
    )
