"""`python -m bench baseline`: whole checks (every watched metric together) the way a schedule runs
them, over seeded seed sets of synthetic histories (bench/check_histories.py), each figure given as
the mean over the seed sets with its range.

Each history is checked after every run with `loadgen.baseline.decide.decide(..., as_raised=True)`,
the function `baseline check` decides with (one budget per check, a count test for the error rate);
an alarm is (metric, placed index, run it was raised at), worse changes only. Figures per seed set:
  - FA checks/100: checks (one after each run) that raised >= 1 alarm on any metric, per 100 runs of
    the change-free histories; FA/metric: alarms per 100 runs and metric;
  - drift FA/100: the same on drifting histories (step alarms; a drift is reported, not alarmed);
  - 5% in 3 / in 5, 10% in 3: share of stepped histories where an alarm on a metric the step moved,
    placed within 2 runs of the step, was raised by the 3rd (5th) run at the new level; early: the
    same (5% and 10% together, in 3) for steps in the first 10 runs;
  - errors in 5: error-share steps (1-3 points) found within 5 runs on the error-rate metric;
  - exact: share of the steps found within 5 placed at the first run of the new level;
  - drift reported: share of drifting histories whose last check reports a worse drift
    (`decide.drifts`); drift, no drift: the same share of the change-free histories.
Seed sets: BASELINE_SEEDS (default 101-105: never used for tuning; tuning used 901-903); sizes per set:
BASELINE_SIZES (free,drift,step5,step10,errors; default 40,10,30,30,15).
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing import Pool
from multiprocessing.pool import Pool as PoolType

from bench import confirm_runs
from bench.check_histories import METRICS, CheckHistory, check_history, seed_set, set_sizes
from loadgen.analysis.changepoint import DetectorSettings
from loadgen.analysis.counts import Counts
from loadgen.baseline.decide import decide, drifts

Alarm = tuple[str, int, int]  # (metric, index placed, detected at)
DEFAULT_SEEDS = (101, 102, 103, 104, 105)
DEFAULT_SIZES = (40, 10, 30, 30, 15)
PER_SET = ("FA checks/100", "5% in 3", "5% in 5", "10% in 3", "errors in 5")  # printed set by set too


@dataclass(frozen=True)
class Variant:
    """One way of deciding a check: the settings and whether counts use the count test."""

    name: str
    settings: DetectorSettings
    count_test: bool = True


def variants() -> list[Variant]:
    """The check as `baseline check` decides it (combined tests and single metrics under one budget),
    the same budget over single metrics only (Bonferroni, as before the combined tests), and as it
    decided before one budget per check (BASELINE_VARIANTS=both: the first two, all: the three; the
    default prints the first only, to keep the bench within minutes)."""
    now = DetectorSettings()
    m = len(METRICS)
    bonferroni = dataclasses.replace(
        now, combined_share=0.0, alpha=0.003, min_before=8, clip_after=3.0, trend_alpha=0.0
    )
    # the settings before issue 20, every metric at them (the split of decide() undone by * m); the
    # t-test for the error rate; the first-run rule of the split is new and stays
    before = dataclasses.replace(
        bonferroni, alpha=0.006 * m, suspect_alpha=0.001 * m, loo_alpha=0.05 * m, clip_after=5.0, min_after=2
    )
    out = [Variant("one budget, combined", now)]
    if os.environ.get("BASELINE_VARIANTS") in ("both", "all"):
        out.append(Variant("Bonferroni only", bonferroni))
    if os.environ.get("BASELINE_VARIANTS") == "all":
        out.append(Variant("per-metric (before)", before, count_test=False))
    return out


def alarms(job: tuple[CheckHistory, DetectorSettings, bool]) -> tuple[list[Alarm], bool]:
    """Every worse change of every metric of one history as checks after each run raised them, and
    whether the last check reports a worse drift on some metric."""
    h, settings, count_test = job
    counts = Counts(h.errors, h.requests) if count_test else None
    found = decide(h.figures, counts, settings, as_raised=True)
    drifting = any(d.worse for d in drifts(h.figures, settings).values())
    return [(m, c.index, c.detected_at) for m, changes in found.items() for c in changes if c.worse], drifting


def hit(h: CheckHistory, found: Sequence[Alarm], within: int) -> Alarm | None:
    """The first alarm on a moved metric placed within 2 runs of the step, raised by the within-th run."""
    at = h.step_at
    if at is None:
        return None
    for alarm in sorted(found, key=lambda a: a[2]):
        metric, index, detected = alarm
        if metric in h.moved and abs(index - at) <= 2 and at <= detected <= at + within - 1:
            return alarm
    return None


def _share(flags: Sequence[bool]) -> float:
    return 100 * sum(flags) / len(flags) if flags else float("nan")


def figures(
    histories: Sequence[CheckHistory], results: Sequence[tuple[list[Alarm], bool]]
) -> dict[str, float]:
    """One seed set's figures (see the module docstring)."""
    found = [a for a, _ in results]
    drifted = {id(h): d for h, (_, d) in zip(histories, results, strict=True)}
    pairs = list(zip(histories, found, strict=True))
    free = [(h, a) for h, a in pairs if h.kind == "free"]
    drift = [(h, a) for h, a in pairs if h.kind == "drift"]
    runs = sum(h.runs for h, _ in free)
    step = {s: [(h, a) for h, a in pairs if h.kind == "step" and h.step == s] for s in (0.05, 0.10)}
    stepped = step[0.05] + step[0.10]
    found5 = [f for h, a in stepped if (f := hit(h, a, 5)) is not None]
    exact = [f[1] == h.step_at for (h, a) in stepped if (f := hit(h, a, 5)) is not None]
    return {
        "FA checks/100": 100 * sum(len({a[2] for a in al}) for _, al in free) / runs,
        "FA/metric": 100 * sum(len(al) for _, al in free) / runs / len(METRICS),
        "drift FA/100": 100
        * sum(len({a[2] for a in al}) for _, al in drift)
        / max(sum(h.runs for h, _ in drift), 1),
        "5% in 3": _share([hit(h, a, 3) is not None for h, a in step[0.05]]),
        "5% in 5": _share([hit(h, a, 5) is not None for h, a in step[0.05]]),
        "10% in 3": _share([hit(h, a, 3) is not None for h, a in step[0.10]]),
        "early in 3": _share([hit(h, a, 3) is not None for h, a in stepped if (h.step_at or 0) < 10]),
        "later in 3": _share([hit(h, a, 3) is not None for h, a in stepped if (h.step_at or 0) >= 10]),
        "errors in 5": _share([hit(h, a, 5) is not None for h, a in pairs if h.kind == "errors"]),
        "exact": _share(exact) if found5 else float("nan"),
        "drift reported": _share([drifted[id(h)] for h, _ in drift]),
        "drift, no drift": _share([drifted[id(h)] for h, _ in free]),
    }


def env_ints(name: str, default: Sequence[int]) -> tuple[int, ...]:
    raw = os.environ.get(name)
    return tuple(int(x) for x in raw.split(",")) if raw else tuple(default)


def run_variant(
    variant: Variant, seeds: Sequence[int], sizes: dict[str, int], pool: PoolType
) -> list[dict[str, float]]:
    """The variant's figures on each seed set."""
    out = []
    for seed in seeds:
        histories = seed_set(seed, sizes)
        jobs = [(h, variant.settings, variant.count_test) for h in histories]
        out.append(figures(histories, pool.map(alarms, jobs, chunksize=4)))
    return out


def spread(per_set: list[dict[str, float]], key: str) -> str:
    """`mean (min-max)` over the seed sets."""
    values = [f[key] for f in per_set]
    fmt = "{:.2f}" if "FA" in key else "{:.0f}"
    return f"{fmt.format(statistics.fmean(values))} ({fmt.format(min(values))}-{fmt.format(max(values))})"


def print_table(results: dict[str, list[dict[str, float]]]) -> None:
    """One row per figure, one column per variant."""
    names = list(results)
    keys = list(next(iter(results.values()))[0])
    print(f"{'figure':<16}" + "".join(f"{n:>26}" for n in names))
    for key in keys:
        print(f"{key:<16}" + "".join(f"{spread(results[n], key):>26}" for n in names))
    for name in names:  # the target figures set by set: a mean near its bound says little alone
        for key in PER_SET:
            fmt = "{:.2f}" if "FA" in key else "{:.0f}"
            print(f"  {name}, {key} per seed set: " + " / ".join(fmt.format(f[key]) for f in results[name]))


def cost(lengths: Sequence[int] = (60, 250, 1000)) -> None:
    """Seconds one check of one series (every metric, as `baseline check`) takes against its length."""
    import random

    for n in lengths:
        h = check_history(random.Random(n), "free", length=(n, n))
        started = time.perf_counter()
        decide(h.figures, Counts(h.errors, h.requests), DetectorSettings())
        print(
            f"  check of one series, {n:5d} runs, {len(METRICS)} metrics: "
            f"{time.perf_counter() - started:.2f} s"
        )


def main(run: Callable[..., None] | None = None) -> None:
    """Print the protocol's table over the seed sets, then the cost of a check."""
    seeds = env_ints("BASELINE_SEEDS", DEFAULT_SEEDS)
    sizes = set_sizes(env_ints("BASELINE_SIZES", DEFAULT_SIZES))
    print(
        f"whole checks: {len(METRICS)} metrics a series; seed sets {', '.join(map(str, seeds))}; "
        f"per set {sizes}"
    )
    print("figures: mean over the seed sets (min-max)")
    with Pool(int(os.environ.get("BENCH_PROCESSES", "2"))) as pool:
        results = {v.name: run_variant(v, seeds, sizes, pool) for v in variants()}
        print_table(results)
        if os.environ.get("BASELINE_CONFIRM", "1") != "0":
            confirm_runs.run(seeds, pool)
    cost()
