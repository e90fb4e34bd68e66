"""Latency objectives written as `ttft_p99=300ms`: parsing and checking against a run summary."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

METRICS = ("ttft", "tpot", "itl", "e2e")
STATS = ("p50", "p90", "p95", "p99", "mean", "max")
_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0}
_SPEC = re.compile(r"^(?P<metric>[a-z0-9]+)_(?P<stat>[a-z0-9]+)=(?P<value>[0-9.]+)(?P<unit>us|ms|s)?$")


class SloError(ValueError):
    """A latency objective that cannot be parsed; the message names the bad value and valid choices."""


@dataclass(frozen=True)
class Objective:
    """One latency bound: `stat` of `metric` (seconds) must be <= `limit_s`."""

    metric: str
    stat: str
    limit_s: float

    @property
    def summary_key(self) -> str:
        """Key of the latency block in summary.json, e.g. `ttft_s`."""
        return f"{self.metric}_s"

    @property
    def label(self) -> str:
        """Human label, e.g. `TTFT p99 <= 300 ms`."""
        return f"{self.metric.upper()} {self.stat} <= {format_seconds(self.limit_s)}"

    def spec(self) -> str:
        """The canonical spelling, e.g. `ttft_p99=300ms`."""
        return f"{self.metric}_{self.stat}={self.limit_s * 1000:g}ms"

    def value(self, summary: dict[str, Any]) -> float | None:
        """The measured value of this objective's statistic in a summary, or None if absent."""
        block = summary.get(self.summary_key) or {}
        raw = block.get(self.stat)
        return float(raw) if isinstance(raw, int | float) else None

    def met(self, summary: dict[str, Any]) -> bool:
        """True when the run measured the statistic and it is within the limit."""
        measured = self.value(summary)
        return measured is not None and measured <= self.limit_s


def parse_objective(text: str) -> Objective:
    """Parse `ttft_p99=300ms` (units us, ms, s; bare numbers are seconds)."""
    match = _SPEC.match(text.strip().lower())
    if match is None:
        raise SloError(f"bad SLO {text!r}: expected METRIC_STAT=VALUE[unit], e.g. ttft_p99=300ms")
    metric, stat = match["metric"], match["stat"]
    if metric not in METRICS:
        raise SloError(f"bad SLO metric {metric!r} in {text!r}: choose from {', '.join(METRICS)}")
    if stat not in STATS:
        raise SloError(f"bad SLO statistic {stat!r} in {text!r}: choose from {', '.join(STATS)}")
    try:
        value = float(match["value"]) * _UNITS[match["unit"] or "s"]
    except ValueError as exc:
        raise SloError(f"bad SLO value in {text!r}: not a number") from exc
    if value <= 0:
        raise SloError(f"bad SLO value in {text!r}: must be > 0")
    return Objective(metric=metric, stat=stat, limit_s=value)


def parse_objectives(texts: tuple[str, ...] | list[str]) -> list[Objective]:
    """Parse several objectives; each text may also hold a comma-separated list."""
    parts = [part for text in texts for part in text.split(",") if part.strip()]
    return [parse_objective(part) for part in parts]


def format_seconds(value: float | None) -> str:
    """Render a duration for humans: `312 ms`, `1.25 s`, `-` for missing."""
    if value is None:
        return "-"
    if value < 1.0:
        return f"{value * 1000:.3g} ms"
    return f"{value:.3g} s"
