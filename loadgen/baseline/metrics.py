"""The figures a baseline watches: store column, summary location and which direction is better."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Watched:
    """One watched figure of a run: its `runs` column and whether a higher value is better."""

    name: str
    label: str
    column: str
    higher_is_better: bool
    unit: str


# name -> figure; the suite's `metrics:` names these (an unknown name lists them).
WATCHED: dict[str, Watched] = {
    w.name: w
    for w in (
        Watched("output_throughput", "output tok/s", "output_throughput", True, "tok/s"),
        Watched("request_throughput", "request throughput", "request_throughput", True, "req/s"),
        Watched("ttft_p50", "TTFT p50", "ttft_p50_s", False, "s"),
        Watched("ttft_p99", "TTFT p99", "ttft_p99_s", False, "s"),
        Watched("tpot_p50", "TPOT p50", "tpot_p50_s", False, "s"),
        Watched("tpot_p99", "TPOT p99", "tpot_p99_s", False, "s"),
        Watched("e2e_p50", "E2E p50", "e2e_p50_s", False, "s"),
        Watched("e2e_p99", "E2E p99", "e2e_p99_s", False, "s"),
        Watched("error_rate", "error rate", "error_rate", False, ""),
        Watched("goodput", "goodput", "goodput", True, "req/s"),
    )
}
DEFAULT_METRICS = (
    "output_throughput",
    "request_throughput",
    "ttft_p50",
    "ttft_p99",
    "tpot_p99",
    "e2e_p99",
    "error_rate",
    "goodput",
)
