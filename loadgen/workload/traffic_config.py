"""The options of realistic traffic (timed traces, multi-turn sessions, ShareGPT files), one frozen type.

`RunConfig.traffic` holds one of these (None: the synthetic / JSONL workloads). Standard library
only; the rules that need `ConfigError` live in `loadgen.workload.traffic` (`check_traffic`).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

TRACE_FORMATS = ("mooncake", "alibaba", "azure", "infergauge")
SAMPLE_BY = ("request", "session")
TIME_UNITS = ("ms", "s")


@dataclass(frozen=True)
class TrafficConfig:
    """Trace replay (`trace`), sessions (`sessions`: `synthetic` or a ShareGPT JSON file), a single-turn
    ShareGPT JSON file (`sharegpt`), and where a `vllm bench serve`-style result goes (`save_result`)."""

    trace: str | None = None
    trace_format: str | None = None  # None: detected from the file
    trace_block_size: int | None = None  # None: the format's (Mooncake 512, Alibaba 16, ours 16)
    trace_time_unit: str | None = None  # None: the format's (Mooncake ms, Alibaba s, ours s)
    trace_speedup: float = 1.0
    trace_start_s: float | None = None  # window on the trace's own clock, from its first request
    trace_end_s: float | None = None
    trace_sample: float | None = None  # keep this share of requests (or sessions), seeded
    trace_sample_by: str = "request"
    trace_sessions: bool = False  # the trace's conversations as closed-loop sessions
    sessions: str | None = None  # "synthetic" or a ShareGPT-format JSON file of conversations
    session_turns: str = "fixed:4"  # turns per synthetic session (a length distribution)
    think_time: str = "fixed:0"  # seconds between an answer and the next turn (fixed:/uniform:/exponential:)
    session_rate: float | None = None  # sessions per second (None: --rate)
    tokenizer: str | None = None  # a local tokenizer directory (tokenizers / transformers)
    sharegpt: str | None = None  # single-turn ShareGPT JSON (`--dataset-name sharegpt`)
    sharegpt_output_len: int | None = None
    save_result: str | None = None  # path of the vllm-bench-serve-style result JSON
    result_label: str | None = None

    def to_manifest(self) -> dict[str, Any]:
        """Every field, as set (for the manifest's config section)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @property
    def closed_loop(self) -> bool:
        """Whether turns wait for answers (sessions, trace sessions): such a run cannot be sharded."""
        return bool(self.sessions or (self.trace and self.trace_sessions))

    @property
    def kind(self) -> str:
        """`trace`, `sessions`, `sharegpt` or `none` (only a result file asked for)."""
        if self.trace:
            return "trace"
        if self.sessions:
            return "sessions"
        if self.sharegpt:
            return "sharegpt"
        return "none"


FIELD_NAMES = tuple(f.name for f in fields(TrafficConfig))


def traffic_from_mapping(raw: dict[str, Any]) -> TrafficConfig:
    """A YAML `traffic:` mapping -> TrafficConfig (unknown keys raise KeyError naming them)."""
    names = {str(k).replace("-", "_"): v for k, v in raw.items()}
    unknown = sorted(set(names) - set(FIELD_NAMES))
    if unknown:
        raise KeyError(f"unknown traffic key(s) {', '.join(unknown)}; valid: {', '.join(FIELD_NAMES)}")
    return TrafficConfig(**names)
