"""Seeded synthetic histories of whole checks: every metric a series watches, run after run.

One history is one series (nightly-style, 20-60 runs). Per run, 8 metrics: TTFT/TPOT/E2E p50 and p99,
output throughput and the error count out of the run's requests. Noise, in log space (relative):
a run-wide factor shared by every metric (a host that is slow that night moves them together, weight
0.6) plus each metric's own; the p50s' own part is normal, the p99s' is Student-t with 3 degrees of
freedom (heavy tails) and 1.5 times the CV. The check's CV is drawn from 2-4%. Outliers: 4% of runs
are 20-40% slow (one-sided) on 2-6 latency metrics at once, throughput down with them. Errors:
binomial out of 300-1,000 requests at a base share of 0-1%, overdispersed (the share of each run is
gamma-distributed around the base, CV 50%), so most runs of a low-error series have zero errors.
Kinds: `free` (no change), `drift` (every latency metric drifts by 0.3-0.8% a run, throughput the
other way), `step` (from a run >= 6 on, a `decode` step moves TPOT, E2E and throughput, a `prefill`
step moves TTFT; each half of the steps) and `errors` (the error share rises by 1-3 points).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

LATENCY = ("ttft_p50", "ttft_p99", "tpot_p50", "tpot_p99", "e2e_p50", "e2e_p99")
METRICS = (*LATENCY, "output_throughput", "error_rate")
STEPPED = {
    "decode": ("tpot_p50", "tpot_p99", "e2e_p50", "e2e_p99", "output_throughput"),
    "prefill": ("ttft_p50", "ttft_p99"),
}
SHARED = 0.6  # weight of the run-wide noise factor
OUTLIER_RATE = 0.04
BASE = {"ttft": 0.05, "tpot": 0.01, "e2e": 1.5, "output": 2000.0}


@dataclass(frozen=True)
class CheckHistory:
    """One series' runs: metric -> values, errors and requests per run, and what was planted."""

    figures: dict[str, list[float]]
    errors: list[int]
    requests: list[int]
    kind: str  # free | drift | step | errors
    step_at: int | None
    step: float
    moved: tuple[str, ...]  # the metrics the step moves
    cv: float

    @property
    def runs(self) -> int:
        """How many runs."""
        return len(self.errors)


def _own(rng: random.Random, heavy: bool) -> float:
    """A unit-variance draw: normal, or Student-t(3) scaled to unit variance (heavy tails)."""
    if not heavy:
        return rng.gauss(0, 1)
    t = rng.gauss(0, 1) / math.sqrt(rng.gammavariate(1.5, 2.0) / 3)  # chi2(3) = gamma(1.5, 2)
    return t / math.sqrt(3.0)


def _shift(metric: str, relative: float) -> float:
    """Log shift of `metric` when latency moves by `relative` (throughput moves the other way)."""
    return -math.log1p(relative) if metric == "output_throughput" else math.log1p(relative)


def _values(
    rng: random.Random, n: int, cv: float, kind: str, step_at: int | None, step: float, moved: tuple[str, ...]
) -> dict[str, list[float]]:
    slope = rng.uniform(0.003, 0.008) if kind == "drift" else 0.0
    out: dict[str, list[float]] = {m: [] for m in METRICS[:-1]}
    for i in range(n):
        shared = rng.gauss(0, 1)
        hit: set[str] = set()
        size = 0.0
        if rng.random() < OUTLIER_RATE:
            size = rng.uniform(0.20, 0.40)
            hit = set(rng.sample(LATENCY, rng.randint(2, 6)))
        for metric in out:
            heavy = metric.endswith("_p99")
            sigma = cv * (1.5 if heavy else 1.0)
            noise = sigma * (SHARED * shared + math.sqrt(1 - SHARED**2) * _own(rng, heavy))
            log = math.log(BASE[metric.split("_")[0]]) + (-noise if metric == "output_throughput" else noise)
            log += _shift(metric, slope * i) if slope else 0.0
            if step_at is not None and i >= step_at and metric in moved:
                log += _shift(metric, step)
            if metric in hit or (metric == "output_throughput" and hit & set(STEPPED["decode"])):
                log += _shift(metric, size if metric != "output_throughput" else size / 2)
            out[metric].append(math.exp(log))
    return out


def _errors(
    rng: random.Random, n: int, kind: str, step_at: int | None, step: float
) -> tuple[list[int], list[int]]:
    base = rng.choice((0.0, 0.001, 0.003, 0.01))
    requests = [rng.randint(300, 1000) for _ in range(n)]
    errors = []
    for i, total in enumerate(requests):
        share = base + (step if kind == "errors" and step_at is not None and i >= step_at else 0.0)
        share = share * rng.gammavariate(4.0, 0.25) if share else 0.0  # overdispersed, CV 50%
        errors.append(sum(rng.random() < min(share, 1.0) for _ in range(total)) if share else 0)
    return errors, requests


def check_history(
    rng: random.Random, kind: str, step: float = 0.0, length: tuple[int, int] = (20, 60)
) -> CheckHistory:
    """One history of `kind` (free | drift | step | errors); `step` is the relative step (a share of
    errors for `errors`)."""
    n = rng.randint(*length)
    cv = rng.uniform(0.02, 0.04)
    step_at = rng.randint(6, n - 5) if kind in ("step", "errors") else None
    moved = STEPPED[rng.choice(("decode", "prefill"))] if kind == "step" else ()
    figures = _values(rng, n, cv, kind, step_at, step, moved)
    errors, requests = _errors(rng, n, kind, step_at, step)
    figures["error_rate"] = [e / r for e, r in zip(errors, requests, strict=True)]
    return CheckHistory(
        figures,
        errors,
        requests,
        kind,
        step_at,
        step,
        moved + (("error_rate",) if kind == "errors" else ()),
        cv,
    )


def spare_runs(rng: random.Random, h: CheckHistory, count: int, stepped: bool) -> dict[str, list[float]]:
    """`count` more runs of `h`'s series (its noise and outliers, no drift) at its level before the
    step or, `stepped`, after it: the confirmation runs a scheduler adds (the error rate left out)."""
    if stepped and h.kind == "step":
        return _values(rng, count, h.cv, "step", 0, h.step, h.moved)
    return _values(rng, count, h.cv, "free", None, 0.0, ())


SIZE_KINDS = ("free", "drift", "step5", "step10", "errors")  # what a seed set's sizes count, in order


def set_sizes(counts: Sequence[int]) -> dict[str, int]:
    """`seed_set`'s sizes from counts in SIZE_KINDS order (the benches' `40,10,30,30,15`)."""
    return dict(zip(SIZE_KINDS, counts, strict=True))


def seed_set(seed: int, sizes: dict[str, int]) -> list[CheckHistory]:
    """One seed set: `sizes` maps `free`, `drift`, `step5`, `step10`, `errors` to how many histories."""
    rng = random.Random(seed)
    out = [check_history(rng, "free") for _ in range(sizes["free"])]
    out += [check_history(rng, "drift") for _ in range(sizes["drift"])]
    out += [check_history(rng, "step", 0.05) for _ in range(sizes["step5"])]
    out += [check_history(rng, "step", 0.10) for _ in range(sizes["step10"])]
    out += [check_history(rng, "errors", rng.uniform(0.01, 0.03)) for _ in range(sizes["errors"])]
    return out
