"""One measured load point of a sweep or capacity search, extracted from a run summary."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

LATENCY_KEYS = ("ttft_s", "tpot_s", "itl_s", "e2e_s")
LOAD_KINDS = ("concurrency", "rate")


@dataclass(frozen=True)
class Point:
    """Figures of one run at one offered load (`load` is a concurrency or a request rate in req/s)."""

    load: float
    kind: str
    run_id: str
    request_throughput: float
    output_token_throughput: float
    total_token_throughput: float
    goodput: float | None
    error_rate: float
    failed: int
    partial: bool
    latency: dict[str, dict[str, float]] = field(default_factory=dict)

    def stat(self, key: str, stat: str) -> float | None:
        """A latency statistic in seconds (`key` like `ttft_s`, `stat` like `p99`), None if absent."""
        value = self.latency.get(key, {}).get(stat)
        return float(value) if isinstance(value, int | float) else None


def _num(value: Any) -> float:
    return float(value) if isinstance(value, int | float) else 0.0


def point_from_summary(summary: dict[str, Any], load: float, kind: str) -> Point:
    """Build a Point from a summary.json dict (see docs/CONTRACTS.md)."""
    latency: dict[str, dict[str, float]] = {}
    for key in LATENCY_KEYS:
        block = summary.get(key)
        if isinstance(block, dict):
            latency[key] = {k: float(v) for k, v in block.items() if isinstance(v, int | float)}
    requests = summary.get("requests") or {}
    goodput = summary.get("goodput")
    return Point(
        load=float(load),
        kind=kind,
        run_id=str(summary.get("run_id", "")),
        request_throughput=_num(summary.get("request_throughput")),
        output_token_throughput=_num(summary.get("output_token_throughput")),
        total_token_throughput=_num(summary.get("total_token_throughput")),
        goodput=float(goodput) if isinstance(goodput, int | float) else None,
        error_rate=_num(summary.get("error_rate")),
        failed=int(_num(requests.get("failed"))),
        partial=bool(summary.get("partial", False)),
        latency=latency,
    )


def load_of_summary(summary: dict[str, Any], kind: str) -> float | None:
    """The offered load a run was given: its max concurrency or its asked rate."""
    raw = summary.get("max_concurrency") if kind == "concurrency" else summary.get("asked_rate")
    return float(raw) if isinstance(raw, int | float) else None


def mean_point(points: list[Point]) -> Point:
    """Repetitions at one load merged: the mean of each figure (run ids joined with `+`)."""
    if len(points) == 1:
        return points[0]
    n = float(len(points))
    latency: dict[str, dict[str, float]] = {}
    for key in {k for p in points for k in p.latency}:
        stats = {s for p in points for s in p.latency.get(key, {})}
        latency[key] = {
            s: sum(p.latency[key][s] for p in points) / n
            for s in stats
            if all(s in p.latency.get(key, {}) for p in points)
        }
    goodputs = [p.goodput for p in points]
    return Point(
        load=points[0].load,
        kind=points[0].kind,
        run_id="+".join(p.run_id for p in points),
        request_throughput=sum(p.request_throughput for p in points) / n,
        output_token_throughput=sum(p.output_token_throughput for p in points) / n,
        total_token_throughput=sum(p.total_token_throughput for p in points) / n,
        goodput=None if None in goodputs else sum(g or 0.0 for g in goodputs) / n,
        error_rate=sum(p.error_rate for p in points) / n,
        failed=sum(p.failed for p in points),
        partial=any(p.partial for p in points),
        latency=latency,
    )
