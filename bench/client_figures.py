"""Pure figures of the client-vs-Go bench (bench.vs_go): one client run's requests, normalised from
loadgen's `requests.jsonl` or refclient's JSONL, joined with the reference server's log.

All times are CLOCK_MONOTONIC ns (loadgen's plain-run `*_ns` are `perf_counter_ns()`, refclient's
`*_mono_ns` are the same clock), so a client's stamps, its CPU samples and the server's log share one
time base.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from loadgen.stats import percentile


@dataclass(frozen=True)
class Req:
    """One request as either client saw it."""

    rid: str
    start_ns: int
    lag_ms: float | None  # send time minus due time (None: the client does not schedule, e.g. streams)
    ttft_ms: float | None
    itl_ms: tuple[float, ...]
    tokens: int
    ok: bool
    due_ns: int | None = None  # when the request was due, CLOCK_MONOTONIC (None: not scheduled)

    def token_times(self) -> list[int]:
        """Arrival of each token-bearing chunk (first token, then the ITLs added up), ns."""
        if self.ttft_ms is None:
            return []
        t = self.start_ns + round(self.ttft_ms * 1e6)
        out = [t]
        for gap in self.itl_ms:
            t += round(gap * 1e6)
            out.append(t)
        return out


def from_loadgen(line: Mapping[str, Any]) -> Req:
    """A loadgen requests.jsonl line (a plain run: `sent_ns` is perf_counter_ns)."""
    ttft, lag_s, sent = line.get("ttft_s"), line.get("schedule_lag_s"), int(line["sent_ns"])
    return Req(
        rid=str(line["x_request_id"]),
        start_ns=sent,
        lag_ms=lag_s * 1e3 if lag_s is not None else None,
        due_ns=sent - round(lag_s * 1e9) if lag_s is not None else None,
        ttft_ms=None if ttft is None else ttft * 1e3,
        itl_ms=tuple(v * 1e3 for v in line.get("itl_s") or ()),
        tokens=int(line.get("output_tokens") or 0),
        ok=line.get("outcome") == "ok",
    )


def from_refclient(line: Mapping[str, Any]) -> Req:
    """A refclient JSONL line (`sched_mono_ns` is 0/absent in concurrency mode)."""
    start, sched = int(line["start_mono_ns"]), int(line.get("sched_mono_ns") or 0)
    ok = bool(line.get("ok"))
    return Req(
        rid=str(line["key"]),
        start_ns=start,
        lag_ms=(start - sched) / 1e6 if sched else None,
        due_ns=sched or None,
        ttft_ms=float(line["ttft_ms"]) if ok or line.get("ttft_ms") else None,
        itl_ms=tuple(float(v) for v in line.get("itl_ms") or ()),
        tokens=int(line.get("out_tokens") or 0),
        ok=ok,
    )


def p(values: Iterable[float], q: float) -> float:
    """The q-th percentile (nan when empty)."""
    got = sorted(values)
    return percentile(got, q) if got else math.nan


def ttft_errors_ms(reqs: Sequence[Req], server_ttft_ms: Mapping[str, float]) -> list[float]:
    """Client TTFT minus the server's own (arrival to first token sent), per request joined on its id."""
    return [
        r.ttft_ms - server_ttft_ms[r.rid] for r in reqs if r.ttft_ms is not None and r.rid in server_ttft_ms
    ]


def arrival_lags_ms(reqs: Sequence[Req], arrivals_ns: Mapping[str, int]) -> list[float]:
    """The server's arrival stamp minus the client's due time, per request joined on its id: lateness
    as the engine sees it, stamped by one clock for both clients (each client's own send stamp is taken
    at a different point: loadgen's after its write, the Go client's before its HTTP client starts)."""
    due = [(r.rid, r.due_ns) for r in reqs if r.due_ns is not None and r.rid in arrivals_ns]
    return [(arrivals_ns[rid] - at) / 1e6 for rid, at in due]


def gap_errors_ms(reqs: Sequence[Req], true_gaps: Mapping[str, Sequence[float]]) -> list[float]:
    """|client ITL − the server's true gap| for every token gap of every request joined on its id."""
    out: list[float] = []
    for r in reqs:
        truth = true_gaps.get(r.rid)
        if truth:
            out += [abs(c - t) for c, t in zip(r.itl_ms, truth, strict=False)]
    return out


def itl_excess_ms(reqs: Sequence[Req], true_ms: float) -> float:
    """The issue's ITL error: the client's ITL p99 minus the true inter-token time (ms)."""
    return p((g for r in reqs for g in r.itl_ms), 99) - true_ms


def window_cpu_s(samples: Sequence[tuple[int, float]], start_ns: int, end_ns: int) -> float:
    """CPU seconds spent in [start_ns, end_ns], linearly interpolated between (time ns, cumulative
    CPU s) samples; nan when the samples do not span the window."""
    if len(samples) < 2 or samples[0][0] > start_ns or samples[-1][0] < end_ns:
        return math.nan
    return _at(samples, end_ns) - _at(samples, start_ns)


def _at(samples: Sequence[tuple[int, float]], t: int) -> float:
    for (t0, c0), (t1, c1) in zip(samples, samples[1:], strict=False):
        if t0 <= t <= t1:
            return c0 if t1 == t0 else c0 + (c1 - c0) * (t - t0) / (t1 - t0)
    return samples[-1][1]


def load_window(reqs: Sequence[Req]) -> tuple[int, int]:
    """First send to last token of the run (ns); (0, 0) when nothing was sent."""
    if not reqs:
        return 0, 0
    ends = [t[-1] if (t := r.token_times()) else r.start_ns for r in reqs]
    return min(r.start_ns for r in reqs), max(ends)


def ideal_tokens_s(streams: int, tokens: int, ttft_ms: float, tpot_ms: float) -> float:
    """Tokens/s a perfect client gets from `streams` back-to-back streams: streams × tokens / (TTFT +
    (tokens − 1) × TPOT)."""
    return streams * tokens / ((ttft_ms + (tokens - 1) * tpot_ms) / 1e3)


def steady_tokens_s(reqs: Sequence[Req], skip_s: float = 1.0) -> float:
    """Tokens/s received between `skip_s` after the first send (ramp-up) and the last send (every
    stream still busy): the streams' steady rate; nan when that window is empty."""
    if not reqs:
        return math.nan
    lo = min(r.start_ns for r in reqs) + round(skip_s * 1e9)
    hi = max(r.start_ns for r in reqs)
    if hi <= lo:
        return math.nan
    n = sum(1 for r in reqs for t in r.token_times() if lo <= t < hi)
    return n / ((hi - lo) / 1e9)


@dataclass(frozen=True)
class Row:
    """One line of the ratio table: a figure, loadgen's and the Go client's medians, the median of the
    per-block ratios (loadgen / Go), and whether higher is better."""

    name: str
    loadgen: float
    go: float
    ratio: float
    higher_better: bool = False
    ratios: tuple[float, float] = (math.nan, math.nan)  # the lowest and highest per-block ratio
    go_spread: float = math.nan  # the Go client's own highest / lowest block - 1: the host's noise

    def met(self) -> bool:
        """loadgen at or better than Go (ratio <= 1, or >= 1 when higher is better)."""
        return self.ratio >= 1.0 if self.higher_better else self.ratio <= 1.0


def median(values: Iterable[float]) -> float:
    """Median of the finite values (nan when none)."""
    kept = [v for v in values if not math.isnan(v)]
    return statistics.median(kept) if kept else math.nan


def ratio_row(name: str, ours: Sequence[float], go: Sequence[float], higher_better: bool = False) -> Row:
    """A Row from per-block figures (same length, block i of each measured side by side)."""
    ratios = [a / b if b else math.nan for a, b in zip(ours, go, strict=True)]
    finite = [r for r in ratios if not math.isnan(r)] or [math.nan]
    spread = max(go) / min(go) - 1 if go and min(go) > 0 else math.nan
    return Row(
        name, median(ours), median(go), median(ratios), higher_better, (min(finite), max(finite)), spread
    )


def format_row(row: Row) -> str:
    """`name  loadgen  go  ratio  met/not met  [blocks lo-hi, Go ±x%]` (ratio marked met when loadgen
    is at or better than Go; the bracket shows how far the per-block ratios and Go's own figures
    moved between blocks, so a median is read against the host's noise)."""
    mark = "met" if row.met() else "not met"
    line = f"{row.name:<44} {row.loadgen:10.3f} {row.go:10.3f} {row.ratio:7.2f}  {mark:<7}"
    lo, hi = row.ratios
    if not math.isnan(lo) and lo != hi:
        line += f"  [blocks {lo:.2f}-{hi:.2f}, Go's own spread {100 * row.go_spread:.0f}%]"
    return line


INGEST_TARGET_PCT = 98.0  # #23: tokens/s at 256 streams, % of ideal, in every block
ITL_TARGET_MS = 0.1  # #23: ITL error p99 at 64 streams, absolute


def absolute_targets(per_block: Mapping[str, Sequence[float]]) -> list[str]:
    """The #23 targets that are absolute rather than ratios to Go, one line each: ingest at 256 streams
    in every block, the ITL error's median. Figures absent from `per_block` give no line."""
    lines = []
    ingest = per_block.get("tokens/s at 256 streams, % of ideal")
    if ingest:
        low = min(ingest)
        verdict = "met" if low >= INGEST_TARGET_PCT else "not met"
        lines.append(
            f"target: >= {INGEST_TARGET_PCT:g}% of ideal at 256 streams in every block: {verdict}"
            f" (lowest {low:.2f}%)"
        )
    itl = per_block.get("ITL error p99 at 64 streams (ITL p99 - 2 ms)")
    if itl:
        mid = median(itl)
        verdict = "met" if mid <= ITL_TARGET_MS else "not met"
        lines.append(
            f"target: ITL error p99 at 64 streams <= {ITL_TARGET_MS:g} ms: {verdict} (median {mid:.3f} ms)"
        )
    return lines


def own_cpu_lines(blocks: Sequence[Mapping[str, float]]) -> list[str]:
    """loadgen's own `client_cpu` per request (its summary) beside the bench's load-window figure for
    the same runs, one line a rate: medians over the blocks that have both."""
    lines = []
    own_keys = sorted({k for b in blocks for k in b if k.startswith("own client_cpu ms/request at ")})
    for own_key in own_keys:
        rate = own_key.removeprefix("own client_cpu ms/request at ")  # "400 req/s"
        window_key = f"CPU ms/request at {rate}, load window"
        pairs = [(b[own_key], b[window_key]) for b in blocks if own_key in b and window_key in b]
        if not pairs:
            continue
        own, window = median(o for o, _ in pairs), median(w for _, w in pairs)
        lines.append(
            f"its own client_cpu at {rate}: {own:.3f} ms/request over its load, the bench's load window"
            f" {window:.3f} (own / bench {own / window:.2f}; median of {len(pairs)} blocks)"
        )
    return lines


def lag_crossing(points: Sequence[tuple[float, float]], limit_ms: float = 2.0) -> str:
    """From (rate, lag p99 ms) points: the first rate whose lag p99 reaches `limit_ms`, with the last
    rate below it, as a line."""
    below = None
    for rate, lag in sorted(points):
        if lag >= limit_ms or math.isnan(lag):
            held = f"{below[0]:g} req/s held ({below[1]:.2f} ms)" if below else "no rate held"
            return f"lag p99 crosses {limit_ms:g} ms at {rate:g} req/s ({lag:.2f} ms); {held}"
        below = (rate, lag)
    top = f"{below[0]:g} req/s ({below[1]:.2f} ms)" if below else "no rates"
    return f"lag p99 stays under {limit_ms:g} ms up to the top rate, {top}"
