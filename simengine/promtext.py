"""A small Prometheus text-format writer that reproduces each engine's exposition byte layout.

vLLM (prometheus_client in one process) follows every counter and histogram with a `<name>_created`
gauge family and writes histogram samples as buckets, `_count`, `_sum`; SGLang (prometheus_client
multiprocess mode) has no `_created` and writes `_sum`, buckets, `_count`. Labels are sorted by name in
both. Histograms accept weighted observations so one step's many equal inter-token gaps cost one call.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Iterable

from prometheus_client.utils import floatToGoString

Labels = tuple[tuple[str, str], ...]


def _labels(pairs: Labels) -> str:
    if not pairs:
        return ""
    inner = ",".join(f'{k}="{v}"' for k, v in sorted(pairs))
    return "{" + inner + "}"


class Family:
    """One metric family: name (with `_total` for counters), HELP, TYPE and labelled values."""

    def __init__(self, name: str, help_text: str, kind: str, *, created: bool) -> None:
        self.name = name
        self.help = help_text
        self.kind = kind
        self.created = created and kind in ("counter", "histogram")
        self.values: dict[Labels, float] = {}
        self.created_at: dict[Labels, float] = {}

    def set(self, labels: Labels, value: float) -> None:
        if labels not in self.values:
            self.created_at[labels] = time.time()
        self.values[labels] = value

    def inc(self, labels: Labels, amount: float = 1.0) -> None:
        if labels not in self.values:
            self.created_at[labels] = time.time()
            self.values[labels] = 0.0
        self.values[labels] += amount

    def render(self, out: list[str]) -> None:
        out.append(f"# HELP {self.name} {self.help}")
        out.append(f"# TYPE {self.name} {self.kind}")
        for labels, value in self.values.items():
            out.append(f"{self.name}{_labels(labels)} {floatToGoString(value)}")
        self._render_created(out)

    def _render_created(self, out: list[str]) -> None:
        if not self.created or not self.created_at:  # a family without series has no `_created` either
            return
        strip = self.kind == "counter" and self.name.endswith("_total")
        base = self.name[:-6] if strip else self.name
        out.append(f"# HELP {base}_created {self.help}")
        out.append(f"# TYPE {base}_created gauge")
        for labels, ts in self.created_at.items():
            out.append(f"{base}_created{_labels(labels)} {floatToGoString(ts)}")


class Histogram(Family):
    """A histogram family with fixed upper bounds (`+Inf` added)."""

    def __init__(
        self, name: str, help_text: str, bounds: Iterable[float], *, created: bool, sum_first: bool
    ) -> None:
        super().__init__(name, help_text, "histogram", created=created)
        self.bounds = [float(b) for b in bounds]
        self.sum_first = sum_first
        self.counts: dict[Labels, list[float]] = {}
        self.sums: dict[Labels, float] = {}

    def ensure(self, labels: Labels) -> None:
        if labels not in self.counts:
            self.counts[labels] = [0.0] * (len(self.bounds) + 1)
            self.sums[labels] = 0.0
            self.created_at[labels] = time.time()

    def observe(self, labels: Labels, value: float, weight: int = 1) -> None:
        """Record `weight` observations of `value`."""
        counts = self.counts.get(labels)
        if counts is None:
            self.ensure(labels)
            counts = self.counts[labels]
        counts[bisect.bisect_left(self.bounds, value)] += weight
        self.sums[labels] += value * weight

    def render(self, out: list[str]) -> None:
        out.append(f"# HELP {self.name} {self.help}")
        out.append(f"# TYPE {self.name} histogram")
        for labels, counts in self.counts.items():
            total = sum(counts)
            sum_line = f"{self.name}_sum{_labels(labels)} {floatToGoString(self.sums[labels])}"
            count_line = f"{self.name}_count{_labels(labels)} {floatToGoString(total)}"
            if self.sum_first:
                out.append(sum_line)
            cumulative = 0.0
            for bound, n in zip([*self.bounds, float("inf")], counts, strict=True):
                cumulative += n
                le = floatToGoString(bound)
                out.append(
                    f"{self.name}_bucket{_labels((*labels, ('le', le)))} {floatToGoString(cumulative)}"
                )
            out.append(count_line)
            if not self.sum_first:
                out.append(sum_line)
        self._render_created(out)


def render(families: Iterable[Family], *, skip_empty: bool = False) -> bytes:
    """The exposition text of `families`, in order (`skip_empty`: leave out families with no series)."""
    out: list[str] = []
    for fam in families:
        if skip_empty and not fam.values and not getattr(fam, "counts", None):
            continue
        fam.render(out)
    return ("\n".join(out) + "\n").encode()
