"""bench.scaling over servers and blocks: the same grid against its own FastServers (`own`) and the
reference server (`ref`, bench.refbench: one Go process with `-procs S` on the same S cores), in
SCALING_BLOCKS interleaved blocks (default 1: block b runs every server kind, their order alternating).

A row "holds" a rate when it was sustained in every block (the issue's reading of two blocks); each
server's summary line gives every row's held ceiling as a multiple of the plain run's on the SAME
server, beside the worst TTFT error p99 at the rates held and the issue's targets (1.8x / 3.4x / 6.5x
for 2 / 4 / 8 workers, TTFT error p99 under 2 ms).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from bench.ref_group import RefServerGroup
from bench.refbench import Tools, locate
from bench.scaling import PLAIN, Point, ServerFactory, ceiling, mode_name, sustained

SERVER_KINDS = ("own", "ref")
TARGETS = {2: 1.8, 4: 3.4, 8: 6.5}  # --workers N vs the plain run's ceiling (issue #25)
TTFT_LIMIT_MS = 2.0


def server_kinds(text: str | None, tools: Tools | str) -> tuple[tuple[str, ...], str]:
    """SCALING_SERVER (own | ref | both; default both when the reference server is available, else
    own): the kinds to run, and a line saying what was chosen or why `ref` is left out."""
    asked = (text or "").strip()
    if asked not in ("", "own", "ref", "both"):
        raise ValueError(f"SCALING_SERVER={text!r}: give own, ref or both")
    if isinstance(tools, str):
        if asked in ("ref", "both"):
            raise ValueError(f"SCALING_SERVER={text!r}: the reference server is not available: {tools}")
        return ("own",), f"reference server skipped: {tools}"
    kinds = ("own", "ref") if asked in ("", "both") else (asked,)
    return kinds, f"servers: {', '.join(kinds)} (ref: {tools.server})"


def factory(kind: str, tools: Tools | str, log_tokens: bool = False) -> ServerFactory | None:
    """The ServerFactory of a kind (None: bench.scaling's default ServerGroup); `log_tokens` for the
    ingest table, which counts every token the server sent."""
    if kind == "own":
        return None
    assert not isinstance(tools, str)
    return lambda cpus, ttft_s, itl_s: RefServerGroup(tools, cpus, ttft_s, itl_s, log_tokens)


def held(blocks: Sequence[Sequence[Point]]) -> dict[int, float | None]:
    """Per worker count: the highest rate sustained in every block (None: none was)."""
    per = [ceiling(points) for points in blocks]
    rows = sorted({w for c in per for w in c})
    out: dict[int, float | None] = {}
    for w in rows:
        got = [c.get(w) for c in per]
        out[w] = None if any(v is None for v in got) else min(v for v in got if v is not None)
    return out


def worst_ttft(blocks: Sequence[Sequence[Point]], workers: int, top: float | None) -> float:
    """The largest TTFT error p99 of a row's sustained runs at rates up to `top`, over all blocks."""
    vals = [
        p.ttft_err_p99_ms
        for points in blocks
        for p in points
        if p.workers == workers and top is not None and p.asked <= top and sustained(p)
    ]
    return max((v for v in vals if not math.isnan(v)), default=math.nan)


def summary_lines(kind: str, blocks: Sequence[Sequence[Point]], grid_top: float) -> list[str]:
    """One line per row: held ceiling, its multiple of the plain run's, TTFT error, target met or not."""
    ceilings = held(blocks)
    plain = ceilings.get(PLAIN)
    lines = [f"{kind} server, held in all {len(blocks)} block(s):"]
    for workers, top in ceilings.items():
        ttft = worst_ttft(blocks, workers, top)
        shown = "none" if top is None else f"{top:g} req/s" + (" (grid top)" if top == grid_top else "")
        ratio = top / plain if top and plain else math.nan
        if not math.isnan(ratio):
            times = f"{ratio:.2f}x plain"
        else:
            times = "no ratio" + ("" if plain else " (the plain run held no rate in every block)")
        error = "" if math.isnan(ttft) else f", TTFT error p99 <= {ttft:.2f} ms"
        line = f"  {mode_name(workers):>5}: {shown}, {times}{error}"
        if workers in TARGETS:
            ok = ratio >= TARGETS[workers] and ttft < TTFT_LIMIT_MS
            line += f"; target {TARGETS[workers]}x and < {TTFT_LIMIT_MS:g} ms: {'met' if ok else 'not met'}"
        lines.append(line)
    return lines


def run_kinds(
    kinds: Sequence[str], blocks: int, run_grid: Mapping[str, object]
) -> dict[str, list[list[Point]]]:
    """Run `run_grid[kind]()` (a callable giving the points) for each kind, `blocks` times, the order
    of kinds alternating; kind -> the points of each block."""
    out: dict[str, list[list[Point]]] = {k: [] for k in kinds}
    for b in range(blocks):
        order = list(kinds) if b % 2 == 0 else list(reversed(kinds))
        for kind in order:
            print(f"\n--- block {b + 1}/{blocks}, {kind} server ---", flush=True)
            grid = run_grid[kind]
            assert callable(grid)
            out[kind].append(grid())
    return out


def tools_or_reason() -> Tools | str:
    """bench.refbench.locate(), wrapped for bench.scaling (no Go: a reason string)."""
    return locate()
