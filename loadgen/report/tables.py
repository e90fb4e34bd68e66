"""Plain-text tables for the terminal (what sweep, capacity and diff print)."""

from __future__ import annotations

from collections.abc import Sequence

from loadgen.analysis.points import Point
from loadgen.analysis.slo import format_seconds


def render(headers: Sequence[str], rows: Sequence[Sequence[str]], left: Sequence[int] = (0,)) -> str:
    """Columns padded to their widest cell; the `left` columns left-aligned, the rest right-aligned."""
    widths = [max(len(str(c)) for c in col) for col in zip(headers, *rows, strict=False)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            str(c).ljust(w) if i in left else str(c).rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=False))
        )

    return "\n".join([line(headers), line(["-" * w for w in widths]), *(line(r) for r in rows)])


POINT_HEADERS = (
    "load",
    "req/s",
    "tok/s",
    "TTFT p50",
    "TTFT p90",
    "TTFT p99",
    "TPOT p50",
    "TPOT p90",
    "TPOT p99",
    "E2E p50",
    "E2E p90",
    "E2E p99",
    "goodput",
    "errors",
    "run_id",
)


def point_row(p: Point) -> list[str]:
    """One table row of a load point (output tok/s; latencies in ms or s)."""
    lat = [
        format_seconds(p.stat(key, stat))
        for key in ("ttft_s", "tpot_s", "e2e_s")
        for stat in ("p50", "p90", "p99")
    ]
    goodput = "-" if p.goodput is None else f"{p.goodput:.2f}"
    return [
        f"{p.load:g}",
        f"{p.request_throughput:.2f}",
        f"{p.output_token_throughput:.1f}",
        *lat,
        goodput,
        f"{p.failed}",
        p.run_id + (" (partial)" if p.partial else ""),
    ]


def points_table(points: Sequence[Point]) -> str:
    """The per-point table of a sweep."""
    return render(POINT_HEADERS, [point_row(p) for p in points])
