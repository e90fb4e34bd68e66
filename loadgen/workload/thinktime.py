"""Think time between an answer and the next turn: `fixed:S`, `uniform:A-B`, `exponential:MEAN`
(seconds; a bare number is fixed; `ms` / `s` suffixes allowed on each number)."""

from __future__ import annotations

import random
from dataclasses import dataclass

from loadgen.config import ConfigError, parse_duration

KINDS = ("fixed", "uniform", "exponential")


@dataclass(frozen=True)
class ThinkTime:
    """A distribution of think times in seconds."""

    kind: str
    a: float
    b: float = 0.0

    def sample(self, rng: random.Random) -> float:
        """One think time (s) drawn from `rng` (fixed draws nothing)."""
        if self.kind == "fixed":
            return self.a
        if self.kind == "uniform":
            return rng.uniform(self.a, self.b)
        return rng.expovariate(1.0 / self.a)

    def __str__(self) -> str:
        if self.kind == "uniform":
            return f"uniform:{self.a:g}-{self.b:g}"
        return f"{self.kind}:{self.a:g}"


def _seconds(text: str, spec: str) -> float:
    if text.strip() in ("0", "0s", "0ms", "0.0"):
        return 0.0
    try:
        return parse_duration(text, "think time")
    except ConfigError:
        raise ConfigError(
            f"invalid --think-time {spec!r}: expected fixed:S, uniform:A-B or exponential:MEAN (seconds)"
        ) from None


def parse_think_time(spec: str) -> ThinkTime:
    """Parse a think-time spec (see the module docstring); ConfigError naming the bad value."""
    kind, sep, rest = spec.strip().partition(":")
    if not sep:
        kind, rest = "fixed", spec
    if kind not in KINDS:
        raise ConfigError(
            f"invalid --think-time {spec!r}: unknown kind {kind!r}; choose from {', '.join(KINDS)}"
        )
    if kind == "uniform":
        low, dash, high = rest.partition("-")
        if not dash:
            raise ConfigError(f"invalid --think-time {spec!r}: uniform needs A-B")
        a, b = _seconds(low, spec), _seconds(high, spec)
        if b < a:
            raise ConfigError(f"invalid --think-time {spec!r}: B must be >= A")
        return ThinkTime(kind, a, b)
    value = _seconds(rest, spec)
    if kind == "exponential" and value <= 0:
        raise ConfigError(f"invalid --think-time {spec!r}: the mean must be > 0")
    return ThinkTime(kind, value)
