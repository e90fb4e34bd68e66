"""Exact statistics from per-request timestamps (pure functions; ns in, seconds out).

Definitions (as `vllm bench serve`), all from `time.perf_counter_ns()` stamped when bytes arrive:
- TTFT = first token-bearing chunk (non-empty `choices`, see sse.py) - request send.
- E2E  = last token-bearing chunk - request send (usage-only chunk and [DONE] excluded).
- TPOT = (E2E - TTFT) / (output_tokens - 1), only when output_tokens >= 2.
- ITL  = gap between consecutive token-bearing chunks, one value per gap.
- Due time = max(scheduled send, moment a --max-concurrency slot came free for the request).
- Slot wait = due time - scheduled send: the queueing the user asked for with --max-concurrency.
- Schedule lag (the client's own lateness) = actual send - due time; scheduled - sent = lag + slot wait.
- Goodput = requests/s (measured window) of ok requests that meet every SLO given.
- Error rate = failed / (ok + failed), failed = every outcome but `ok` and `cancelled`: a request
  loadgen cancelled itself (a stop, --max-error-rate, Ctrl-C) is neither a success nor a failure.
- Mean prompt / output tokens = mean over ok requests of usage's counts (the configured length when
  the server gave no prompt count).
Percentiles use linear interpolation between closest ranks (numpy's default), on raw samples.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable, Mapping, Sequence
from itertools import repeat
from operator import mul, sub, truediv
from typing import Any

from loadgen.records import OUTCOMES, SELF_CANCELLED, RequestRecord

NS = 1e9
PERCENTILES = (50, 90, 95, 99)
try:  # the sort of `describe_ns` in C (loadgen/_sortq.c); not built: sorted() / numpy below
    from loadgen import _sortq  # type: ignore[attr-defined]
except ImportError:
    _sortq = None
NUMPY_SORT_FROM = 1_000_000  # values: from here `describe_ns` sorts with numpy (memory), below with sorted()


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """q-th percentile (0-100) of already sorted values, linear interpolation (numpy 'linear')."""
    if len(sorted_values) == 0:  # not `not`: numpy arrays (describe_ns) have no truth value
        raise ValueError("percentile of no values")
    return _interpolate(sorted_values, len(sorted_values), q)


def _spot(n: int, q: float) -> tuple[int, int, float]:
    """Where the q-th percentile of n sorted values falls: the ranks below and above, and how far
    between them."""
    pos = (n - 1) * q / 100.0
    lo = math.floor(pos)
    return lo, min(lo + 1, n - 1), pos - lo


def _interpolate(at: Sequence[float] | Mapping[int, int], n: int, q: float) -> float:
    """The q-th percentile of n sorted values from those at its two ranks (`at[rank]`)."""
    lo, hi, frac = _spot(n, q)
    return at[lo] + (at[hi] - at[lo]) * frac


def describe(values: Iterable[float]) -> dict[str, float | int | None]:
    """count, mean, std (population), min, max, p50/p90/p95/p99 of the values (None when empty)."""
    data = sorted(values)
    n = len(data)
    if n == 0:
        keys = ["mean", "std", "min", "max", *(f"p{q}" for q in PERCENTILES)]
        return {"count": 0, **dict.fromkeys(keys)}
    mean = math.fsum(data) / n
    var = math.fsum(map(pow, map(sub, data, repeat(mean)), repeat(2))) / n
    out: dict[str, float | int | None] = {
        "count": n,
        "mean": mean,
        "std": math.sqrt(var),
        "min": data[0],
        "max": data[-1],
    }
    for q in PERCENTILES:
        out[f"p{q}"] = percentile(data, q)
    return out


def _sorted_ns(values: array[int], own: bool = False) -> Sequence[int]:
    """The values sorted: in C where `loadgen._sortq` is built (a copy, 8 bytes a value, or `values`
    itself when the caller hands it over: `own`; no numpy); else a list when small, numpy's 8 bytes a
    value when large (a list of ints takes 36; numpy's import, ~0.1-0.3 s of CPU and ~30 MB, is paid
    only where the sort itself costs more)."""
    if _sortq is not None:
        out = values if own else array("q", values)
        _sortq.sort(out)
        return out
    if len(values) < NUMPY_SORT_FROM:
        return sorted(values)
    import numpy as np

    return np.sort(np.frombuffer(values, dtype=np.int64))  # type: ignore[return-value]


def describe_ns(values: array[int], own: bool = False) -> dict[str, float | int | None]:
    """`describe` of integer nanoseconds, in seconds: sum and variance in exact integers (the same
    figures whichever way the values are ordered); a saturated run holds millions of ITLs this way.
    `own`: the caller hands `values` over, and they may be reordered in place (no copy). Where
    `loadgen._sortq` is built, its `describe` finds the sums, the extremes and the few ranks the
    percentiles read without sorting everything (O(n)); else the values are sorted (`_sorted_ns`)."""
    n = len(values)
    if n == 0:
        return describe(())
    ranks = sorted({r for q in PERCENTILES for r in _spot(n, q)[:2]})  # the values the percentiles read
    if _sortq is not None:
        total, squares, least, most, picked = _sortq.describe(values if own else array("q", values), ranks)
        if squares is None:  # past 128 bits (not an ITL): Python's integers
            squares = sum(map(mul, values, values))
        at = dict(zip(ranks, picked, strict=True))
    else:
        data = _sorted_ns(values, own)
        total, squares, least, most = sum(values), sum(map(mul, values, values)), int(data[0]), int(data[-1])
        at = {r: int(data[r]) for r in ranks}
    var_ns2 = (n * squares - total * total) / (n * n)  # exact until the division
    out: dict[str, float | int | None] = {
        "count": n,
        "mean": total / n / NS,
        "std": math.sqrt(max(var_ns2, 0.0)) / NS,
        "min": least / NS,
        "max": most / NS,
    }
    for q in PERCENTILES:
        out[f"p{q}"] = float(_interpolate(at, n, q)) / NS
    return out


def ttft_s(r: RequestRecord) -> float | None:
    """Time to first token in seconds."""
    return None if r.first_ns is None else (r.first_ns - r.sent_ns) / NS


def e2e_s(r: RequestRecord) -> float | None:
    """End-to-end latency to the last token-bearing chunk, in seconds."""
    return None if r.last_ns is None else (r.last_ns - r.sent_ns) / NS


def tpot_s(r: RequestRecord) -> float | None:
    """Time per output token after the first, in seconds; None below 2 output tokens."""
    if r.first_ns is None or r.last_ns is None or r.output_tokens < 2:
        return None
    return (r.last_ns - r.first_ns) / NS / (r.output_tokens - 1)


def itls_s(r: RequestRecord) -> list[float]:
    """Inter-token latencies (gaps between consecutive token-bearing chunks) in seconds."""
    t = r.token_ns
    return list(map(truediv, map(sub, t[1:], t), repeat(NS)))


def itl_gaps_ns(records: Iterable[RequestRecord], into: array[int] | None = None) -> array[int]:
    """Every inter-token gap of the records, in ns, appended to `into` (a new array when None)."""
    out = array("q") if into is None else into
    for r in records:
        t = r.token_ns
        out.extend(map(sub, t[1:], t))
    return out


def meets_slo(r: RequestRecord, slo: dict[str, float]) -> bool:
    """True when an ok request is within every SLO given (an undefined TPOT does not fail it)."""
    if r.outcome != "ok":
        return False
    checks = {"ttft_s": ttft_s(r), "tpot_s": tpot_s(r), "e2e_s": e2e_s(r)}
    return all(checks[k] is None or checks[k] <= limit for k, limit in slo.items())  # type: ignore[operator]


def window_s(records: Sequence[RequestRecord]) -> float:
    """Measured window: first send to last completion (or last token), in seconds."""
    if not records:
        return 0.0
    start = min(r.sent_ns for r in records)
    end = max((r.done_ns or r.last_ns or r.sent_ns) for r in records)
    return max(end - start, 0) / NS


def token_count_kind(records: Iterable[RequestRecord]) -> str:
    """`usage` when every ok request's count came from usage, `estimated` when none did, else `mixed`."""
    kinds = {r.token_count for r in records if r.outcome == "ok"}
    if len(kinds) == 1:
        return kinds.pop()
    return "mixed" if kinds else "usage"


def _rate(n: float, seconds: float) -> float:
    return n / seconds if seconds > 0 else 0.0


def error_rate(ok: int, failed: int) -> float:
    """failed / (ok + failed); cancelled requests are in neither (0.0 when there are none)."""
    return failed / (ok + failed) if ok + failed else 0.0


def prompt_tokens_of(r: RequestRecord) -> int:
    """Prompt tokens of a request: usage's count, else the configured input length."""
    return r.input_len if r.prompt_tokens is None else r.prompt_tokens


def _mean(total: int, n: int) -> float | None:
    return total / n if n else None


def summarize(
    records: Sequence[RequestRecord], slo: dict[str, float], itl_ns: array[int] | None = None
) -> dict[str, Any]:
    """Throughputs, latency distributions, goodput and outcome counts of the measured requests.

    `records` holds every sent request (warmup included); only non-warmup ones are measured.
    `itl_ns` holds the gaps of measured ok requests whose `token_ns` a run already released
    (loadgen.run.measure: once a request is in the journal); the others' gaps are appended to it, and
    it is handed over (sorted in place: a saturated run's millions of gaps are not copied).
    """
    measured = [r for r in records if not r.warmup and r.outcome is not None]
    ok = [r for r in measured if r.outcome == "ok"]
    window = window_s(measured)
    by_outcome = {o: sum(1 for r in measured if r.outcome == o) for o in OUTCOMES}
    prompt_tokens = sum(map(prompt_tokens_of, ok))
    output_tokens = sum(r.output_tokens for r in ok)
    slo_met = sum(1 for r in ok if meets_slo(r, slo)) if slo else None
    cancelled = by_outcome[SELF_CANCELLED]
    failed = len(measured) - len(ok) - cancelled
    return {
        "requests": {
            "total": len(records),
            "measured": len(measured),
            "warmup": len(records) - len([r for r in records if not r.warmup]),
            "ok": len(ok),
            "failed": failed,
            "cancelled": cancelled,
            "by_outcome": by_outcome,
        },
        "error_rate": error_rate(len(ok), failed),
        "token_count": token_count_kind(measured),
        "duration_s": window,
        "total_input_tokens": prompt_tokens,
        "total_output_tokens": output_tokens,
        "mean_prompt_tokens": _mean(prompt_tokens, len(ok)),
        "mean_output_tokens": _mean(output_tokens, len(ok)),
        "request_throughput": _rate(len(ok), window),
        "input_token_throughput": _rate(prompt_tokens, window),
        "output_token_throughput": _rate(output_tokens, window),
        "total_token_throughput": _rate(prompt_tokens + output_tokens, window),
        "goodput": None if slo_met is None else _rate(slo_met, window),
        "slo": dict(slo),
        "slo_met_requests": slo_met,
        "ttft_s": describe(v for r in ok if (v := ttft_s(r)) is not None),
        "tpot_s": describe(v for r in ok if (v := tpot_s(r)) is not None),
        "itl_s": describe_ns(itl_gaps_ns(ok, itl_ns), own=True),  # the caller's gaps, handed over
        "e2e_s": describe(v for r in ok if (v := e2e_s(r)) is not None),
        "schedule_lag_s": describe(r.schedule_lag_ns / NS for r in measured),
        "slot_wait_s": describe(r.slot_wait_ns / NS for r in measured),
    }
