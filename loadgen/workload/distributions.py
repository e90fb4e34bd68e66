"""Seeded length distributions: `fixed:N`, `uniform:A-B`, `normal:MEAN,STD`, `lognormal:MEDIAN,SIGMA`."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

KINDS = ("fixed", "uniform", "normal", "lognormal")


class SpecError(ValueError):
    """A length or SLO specification the user wrote cannot be parsed."""


@dataclass(frozen=True)
class LengthDist:
    """A distribution of token counts; `sample` never returns less than `minimum`."""

    kind: str
    a: float
    b: float = 0.0
    minimum: int = 1

    def sample(self, rng: random.Random) -> int:
        """Draw one length (an int >= minimum) from `rng`."""
        if self.kind == "fixed":
            value = self.a
        elif self.kind == "uniform":
            value = rng.randint(int(self.a), int(self.b))
        elif self.kind == "normal":
            value = rng.gauss(self.a, self.b)
        else:  # lognormal: a = median, b = sigma of the underlying normal
            value = rng.lognormvariate(math.log(self.a), self.b)
        return max(self.minimum, int(round(value)))

    @property
    def mean(self) -> float:
        """The distribution's mean before clipping (used for sizing and the manifest)."""
        if self.kind == "uniform":
            return (self.a + self.b) / 2
        if self.kind == "lognormal":
            return self.a * math.exp(self.b**2 / 2)
        return self.a

    def __str__(self) -> str:
        if self.kind == "fixed":
            return f"fixed:{int(self.a)}"
        if self.kind == "uniform":
            return f"uniform:{int(self.a)}-{int(self.b)}"
        return f"{self.kind}:{self.a:g},{self.b:g}"


def _number(text: str, spec: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise SpecError(f"bad length {spec!r}: {text!r} is not a number") from None
    if not math.isfinite(value) or value < 0:
        raise SpecError(f"bad length {spec!r}: {text!r} must be a finite number >= 0")
    return value


def parse_length(spec: str | int) -> LengthDist:
    """Parse a length spec; a bare integer means `fixed:N`.

    >>> parse_length("uniform:10-20")
    LengthDist(kind='uniform', a=10.0, b=20.0, minimum=1)
    """
    text = str(spec).strip()
    kind, sep, rest = text.partition(":")
    if not sep:
        kind, rest = "fixed", text
    if kind not in KINDS:
        raise SpecError(f"bad length {text!r}: unknown kind {kind!r}; choose from {', '.join(KINDS)}")
    if kind == "fixed":
        value = _number(rest, text)
        if value < 1 or value != int(value):
            raise SpecError(f"bad length {text!r}: fixed length must be an integer >= 1")
        return LengthDist("fixed", value)
    sep_char = "-" if kind == "uniform" else ","
    parts = rest.split(sep_char)
    if len(parts) != 2:
        forms = {"uniform": "uniform:A-B", "normal": "normal:MEAN,STD", "lognormal": "lognormal:MEDIAN,SIGMA"}
        raise SpecError(f"bad length {text!r}: expected {forms[kind]}")
    a, b = _number(parts[0], text), _number(parts[1], text)
    if kind == "uniform" and (a < 1 or b < a or a != int(a) or b != int(b)):
        raise SpecError(f"bad length {text!r}: uniform needs integers 1 <= A <= B")
    if kind in ("normal", "lognormal") and a <= 0:
        raise SpecError(f"bad length {text!r}: {'mean' if kind == 'normal' else 'median'} must be > 0")
    return LengthDist(kind, a, b)
