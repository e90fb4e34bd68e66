"""`loadgen run`'s realistic-traffic flags (trace replay, sessions, ShareGPT, tokenizer) and the
`vllm bench serve` aliases, resolved once into RunConfig fields (`traffic_fields`).

Aliases map onto our options with vLLM's semantics and defaults (vllm/benchmarks/datasets.py, serve.py):
`--dataset-name random` = `--workload random` (random-text on chat) with `--random-input-len`
(1024) / `--random-output-len` (128), `--random-range-ratio R` = uniform over [L(1-R), L(1+R)],
`--random-prefix-len P` = one shared prefix of P tokens; `prefix_repetition` = `--workload
shared-prefix` (prefix 256, suffix 256, 10 prefixes, output 128); `sharegpt` = a ShareGPT JSON file
(`--dataset-path`, `--sharegpt-output-len`); `custom` = a JSONL of `prompt`s (`--dataset-path`,
`--custom-output-len` 256); `--request-rate` = `--rate`. `--save-result` writes vLLM's result JSON.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from loadgen.config import ConfigError, parse_duration, parse_rate
from loadgen.workload.traffic_config import SAMPLE_BY, TIME_UNITS, TRACE_FORMATS, TrafficConfig

DATASET_NAMES = ("random", "sharegpt", "prefix_repetition", "custom")
_OPTIONS: tuple[Callable[[Any], Any], ...] = (
    click.option("--trace", type=click.Path(dir_okay=False), help="Replay a trace file at its own times."),
    click.option(
        "--trace-format", type=click.Choice(TRACE_FORMATS), help="Trace format (default: detected)."
    ),
    click.option("--trace-block-size", type=int, help="Tokens per hash id (Mooncake 512, Alibaba 16)."),
    click.option("--trace-time-unit", type=click.Choice(TIME_UNITS), help="Unit of the trace's timestamps."),
    click.option("--trace-speedup", type=float, help="Replay N times faster (default 1)."),
    click.option("--trace-start", help="Window start on the trace's clock (e.g. 60s)."),
    click.option("--trace-end", help="Window end on the trace's clock (e.g. 120s)."),
    click.option("--trace-sample", type=float, help="Keep this share (0-1] of requests, seeded."),
    click.option(
        "--trace-sample-by", type=click.Choice(SAMPLE_BY), help="Sample requests or whole sessions."
    ),
    click.option(
        "--trace-sessions", is_flag=True, default=None, help="Replay the trace's conversations as sessions."
    ),
    click.option("--sessions", help="Multi-turn sessions: synthetic, or a ShareGPT JSON file."),
    click.option("--session-turns", help="Turns per synthetic session (e.g. uniform:2-6; default fixed:4)."),
    click.option(
        "--think-time", help="Between an answer and the next turn: fixed:2s | uniform:1s-3s | exponential:2s."
    ),
    click.option("--session-rate", type=float, help="Sessions per second (default --rate)."),
    click.option(
        "--tokenizer",
        type=click.Path(),
        help="Tokenizer dir, or 'engine' (its /tokenize), for ShareGPT lengths.",
    ),
    click.option("--dataset-name", type=click.Choice(DATASET_NAMES), help="vllm bench serve alias."),
    click.option(
        "--dataset-path", type=click.Path(dir_okay=False), help="As vllm bench serve: sharegpt/custom file."
    ),
    click.option("--random-input-len", type=int, help="As vllm bench serve (default 1024)."),
    click.option("--random-output-len", type=int, help="As vllm bench serve (default 128)."),
    click.option(
        "--random-range-ratio", type=float, help="As vllm bench serve: lengths uniform in L(1-R)..L(1+R)."
    ),
    click.option("--random-prefix-len", type=int, help="As vllm bench serve: one shared prefix of N tokens."),
    click.option("--prefix-repetition-prefix-len", type=int, help="As vllm bench serve (default 256)."),
    click.option("--prefix-repetition-suffix-len", type=int, help="As vllm bench serve (default 256)."),
    click.option("--prefix-repetition-num-prefixes", type=int, help="As vllm bench serve (default 10)."),
    click.option("--prefix-repetition-output-len", type=int, help="As vllm bench serve (default 128)."),
    click.option(
        "--sharegpt-output-len", type=int, help="As vllm bench serve: fixed output length for sharegpt."
    ),
    click.option("--custom-output-len", type=int, help="As vllm bench serve (default 256)."),
    click.option("--request-rate", help="As vllm bench serve: --rate."),
    click.option(
        "--save-result", is_flag=True, default=None, help="Also write vllm bench serve's result JSON."
    ),
    click.option("--result-dir", help="Directory of the --save-result file (default .)."),
    click.option("--result-filename", help="Name of the --save-result file."),
    click.option("--label", help="Label of the --save-result file (default openai)."),
)
PLAIN = (  # flags that are TrafficConfig fields as they are
    *("trace", "trace_format", "trace_block_size", "trace_time_unit", "trace_speedup", "trace_sample"),
    *(
        "trace_sample_by",
        "trace_sessions",
        "sessions",
        "session_turns",
        "think_time",
        "session_rate",
        "tokenizer",
    ),
)


def traffic_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Add the traffic flags and vLLM aliases to a click command."""
    for option in reversed(_OPTIONS):
        command = option(command)
    return command


_PROBE = click.Command("probe")
for _option in _OPTIONS:
    _option(_PROBE)
KEYS = tuple(p.name for p in _PROBE.params if p.name)  # every flag above, as click names it


def _set(out: dict[str, Any], key: str, value: Any, flag: str) -> None:
    """An alias sets our field; the same field given both ways with other values is an error."""
    if key in out and out[key] != value:
        raise ConfigError(
            f"{flag} {value!r} disagrees with the option it aliases ({key.replace('_', '-')} {out[key]!r})"
        )
    out[key] = value


def _random_len(length: int, ratio: float) -> str:
    """vLLM's random lengths: uniform integers in [floor(L(1-R)), ceil(L(1+R))], or exactly L."""
    if not ratio:
        return f"fixed:{length}"
    if not 0 <= ratio < 1:
        raise ConfigError(f"invalid --random-range-ratio {ratio!r}: must be in [0, 1)")
    return f"uniform:{max(1, math.floor(length * (1 - ratio)))}-{math.ceil(length * (1 + ratio))}"


def _dataset_name(name: str, v: dict[str, Any], out: dict[str, Any], traffic: dict[str, Any]) -> None:
    """`--dataset-name` and its options -> our workload fields (see the module docstring)."""
    path = v.get("dataset_path")
    if name in ("random", "prefix_repetition") and path:
        raise ConfigError(f"--dataset-name {name} takes no --dataset-path (that is for sharegpt or custom)")
    if name in ("sharegpt", "custom") and not path:
        raise ConfigError(f"--dataset-name {name} needs --dataset-path FILE")
    if name == "random":
        ratio = v.get("random_range_ratio") or 0.0
        _set(out, "input_len", _random_len(v.get("random_input_len") or 1024, ratio), "--random-input-len")
        _set(out, "output_len", _random_len(v.get("random_output_len") or 128, ratio), "--random-output-len")
        prefix = v.get("random_prefix_len") or 0
        if prefix:
            out.update(workload="shared-prefix", shared_prefix_len=prefix, shared_prefix_groups=1)
        else:
            out["workload"] = "random-text" if out.get("endpoint") == "chat" else "random"
    elif name == "prefix_repetition":
        out.update(workload="shared-prefix", shared_prefix_len=v.get("prefix_repetition_prefix_len") or 256)
        out["shared_prefix_groups"] = v.get("prefix_repetition_num_prefixes") or 10
        _set(
            out,
            "input_len",
            f"fixed:{v.get('prefix_repetition_suffix_len') or 256}",
            "--prefix-repetition-suffix-len",
        )
        _set(
            out,
            "output_len",
            f"fixed:{v.get('prefix_repetition_output_len') or 128}",
            "--prefix-repetition-output-len",
        )
    elif name == "sharegpt":
        traffic.update(sharegpt=path, sharegpt_output_len=v.get("sharegpt_output_len"))
    else:
        _set(out, "dataset", path, "--dataset-path")
        _set(out, "output_len", f"fixed:{v.get('custom_output_len') or 256}", "--custom-output-len")


def _traffic(v: dict[str, Any]) -> dict[str, Any]:
    """The TrafficConfig fields the flags give."""
    traffic: dict[str, Any] = {}
    for key in PLAIN:
        if v.get(key) is not None:
            traffic[key] = v[key]
    for key in ("trace_start", "trace_end"):
        if v.get(key) is not None:
            traffic[f"{key}_s"] = (
                0.0
                if str(v[key]).strip() in ("0", "0s")
                else parse_duration(v[key], f"--{key.replace('_', '-')}")
            )
    return traffic


def result_path(v: dict[str, Any]) -> str | None:
    """Where `--save-result` writes: --result-dir / --result-filename, else vLLM's file name pattern
    `{label}-{rate}qps[-concurrency{N}]-{model}-{date}.json` (the model is filled in after the run)."""
    if not v.get("save_result"):
        return None
    if v.get("result_filename"):
        name = str(v["result_filename"]).replace("{", "{{").replace("}", "}}")  # taken as written
    else:
        name = "{label}-{rate}qps{concurrency}-{model}-{date}.json"  # filled in after the run
    folder = str(v.get("result_dir") or ".").replace("{", "{{").replace("}", "}}")
    return str(Path(folder) / name)


def traffic_fields(flags: dict[str, Any]) -> dict[str, Any]:
    """Pop the traffic flags and aliases from `flags`; returns the RunConfig fields they set
    (`traffic` and, for aliases, our own fields), merged over what `flags` already holds."""
    v = {k: flags.pop(k) for k in KEYS if k in flags}
    out = dict(flags)
    if v.get("request_rate") is not None:
        _set(out, "rate", parse_rate(v["request_rate"]), "--request-rate")
    traffic = _traffic(v)
    if v.get("dataset_name"):
        _dataset_name(v["dataset_name"], v, out, traffic)
    elif v.get("dataset_path"):
        raise ConfigError("--dataset-path needs --dataset-name sharegpt or custom")
    save = result_path(v)
    if save is not None:
        traffic.update(save_result=save, result_label=v.get("label"))
    if traffic:
        try:
            out["traffic"] = TrafficConfig(**traffic)
        except TypeError as exc:
            raise ConfigError(str(exc)) from None
    return out
