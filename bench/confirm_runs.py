"""Confirmation runs measured: scheduled passes with and without K re-runs of a suspected series.

Each history of bench/check_histories.py (change-free, and 5% / 10% steps) is one series run once per
scheduled pass. After every run the check decides as `baseline check` does
(`loadgen.baseline.decide.decide`, every watched metric and combined test at its share of one
budget); when it leaves a worse change *suspected* (the newest run alone reads worse) and no
confirmed one, the pass runs the series again at once, up to K times, checking after each
(loadgen/baseline/cycle.py): a confirmation run is a fresh draw of the same series at the level of
its pass (bench.check_histories.spare_runs). Figures per K, mean over the seed sets (min-max):
  - FA passes/100: scheduled passes that raised a confirmed regression on a change-free series,
    per 100 passes;
  - 5% / 10% in 1, in 3: share of stepped series whose step (an alarm on a metric it moved, placed
    within 2 passes of it) was confirmed by the step's own pass (in 1) or by its 3rd pass (in 3);
  - delay: mean passes from the step to its alarm (1: the step's own pass), over those found within
    10 passes;
  - extra runs/100: confirmation runs per 100 scheduled passes (what K costs in machine time).
The error rate is left out here (its count test raises no suspicions, and the synthetic confirmation
runs carry no error counts): 7 metrics a series. Sizes per set: CONFIRM_SIZES (free,step5,step10;
default 12,8,8); K: CONFIRM_K (default 0,2); seed sets as the main table (BASELINE_SEEDS).
"""

from __future__ import annotations

import os
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from multiprocessing.pool import Pool as PoolType

from bench.check_histories import CheckHistory, seed_set, spare_runs
from loadgen.analysis.changepoint import DetectorSettings
from loadgen.baseline.decide import decide

NEAR = 2  # passes between the step and where an alarm places it
SPARES = 40  # confirmation runs drawn per level and history (more than any history uses)


@dataclass
class Passes:
    """One series run pass by pass: the figures of each run, its pass, whether it is a re-run."""

    figures: dict[str, list[float]]
    passes: list[int]
    confirm: list[bool] = field(default_factory=list)

    def insert(self, at: int, run: dict[str, float], pass_no: int) -> None:
        """A confirmation run of pass `pass_no` as run `at`."""
        for metric, values in self.figures.items():
            values.insert(at, run[metric])
        self.passes.insert(at, pass_no)
        self.confirm.insert(at, True)


@dataclass(frozen=True)
class Outcome:
    """What a series' passes raised: (pass raised at, pass placed at, metric) per alarm; re-runs."""

    alarms: list[tuple[int, int, str]]
    extra_runs: int


def _checks(p: Passes, settings: DetectorSettings) -> tuple[set[int], set[int], list[tuple[int, int, str]]]:
    """Runs whose check confirmed a worse change, runs whose check suspected one, and the alarms."""
    found = decide(p.figures, None, settings, as_raised=True, suspicions=True)
    confirmed, suspected, alarms = set(), set(), []
    for metric, changes in found.items():
        for c in changes:
            if not c.worse:
                continue
            if c.status == "confirmed":
                confirmed.add(c.detected_at)
                alarms.append((p.passes[c.detected_at], p.passes[c.index], metric))
            else:
                suspected.add(c.detected_at)
    return confirmed, suspected, alarms


def simulate(h: CheckHistory, settings: DetectorSettings, k: int, seed: int) -> Outcome:
    """The history's passes with up to `k` confirmation runs after a suspected check (see the module's
    text); the check is re-run from scratch after each insertion (it only looks back)."""
    rng = random.Random(seed)
    spares = {stepped: spare_runs(rng, h, SPARES, stepped) for stepped in (False, True)}
    used = {False: 0, True: 0}
    figures = {m: list(v) for m, v in h.figures.items() if m != "error_rate"}
    p = Passes(figures, list(range(h.runs)), [False] * h.runs)
    start = 0
    while True:
        confirmed, suspected, alarms = _checks(p, settings)
        at = _needs_rerun(p, confirmed, suspected, start, k)
        if at is None:
            return Outcome(alarms, sum(p.confirm))
        pass_no = p.passes[at - 1]
        stepped = h.step_at is not None and pass_no >= h.step_at
        j, used[stepped] = used[stepped], used[stepped] + 1
        p.insert(at, {m: spares[stepped][m][j % SPARES] for m in figures}, pass_no)
        start = at + 1


def _needs_rerun(p: Passes, confirmed: set[int], suspected: set[int], start: int, k: int) -> int | None:
    """Where the first confirmation run not yet made goes (after a suspected check of a pass that has
    had fewer than k), or None."""
    for run in range(max(start - 1, 0), len(p.passes)):
        if run in confirmed or run not in suspected:
            continue
        pass_no = p.passes[run]
        made = sum(1 for r in range(run + 1) if p.confirm[r] and p.passes[r] == pass_no)
        next_is_rerun = run + 1 < len(p.passes) and p.confirm[run + 1]
        if made < k and not next_is_rerun:
            return run + 1
    return None


def job(args: tuple[CheckHistory, DetectorSettings, int, int]) -> Outcome:
    """One (history, settings, K, seed) simulation, for a process pool."""
    h, settings, k, seed = args
    return simulate(h, settings, k, seed)


def _found_at(h: CheckHistory, o: Outcome) -> int | None:
    """Passes from the step to its first alarm (1: the step's own pass), or None."""
    at = h.step_at
    if at is None:
        return None
    hits = [r for r, placed, metric in o.alarms if metric in h.moved and abs(placed - at) <= NEAR and r >= at]
    return min(hits) - at + 1 if hits else None


def figures(histories: Sequence[CheckHistory], outcomes: Sequence[Outcome]) -> dict[str, float]:
    """One seed set's figures for one K (see the module's text)."""
    pairs = list(zip(histories, outcomes, strict=True))
    free = [(h, o) for h, o in pairs if h.kind == "free"]
    passes = sum(h.runs for h, _ in pairs)
    out = {
        "FA passes/100": 100
        * sum(len({a[0] for a in o.alarms}) for _, o in free)
        / sum(h.runs for h, _ in free)
    }
    delays = []
    for size, name in ((0.05, "5%"), (0.10, "10%")):
        found = [_found_at(h, o) for h, o in pairs if h.kind == "step" and h.step == size]
        out[f"{name} in 1"] = 100 * sum(d is not None and d <= 1 for d in found) / max(len(found), 1)
        out[f"{name} in 3"] = 100 * sum(d is not None and d <= 3 for d in found) / max(len(found), 1)
        delays += [d for d in found if d is not None and d <= 10]
    out["delay (passes)"] = statistics.fmean(delays) if delays else float("nan")
    out["extra runs/100"] = 100 * sum(o.extra_runs for _, o in pairs) / passes
    return out


def _ints(name: str, default: Sequence[int]) -> tuple[int, ...]:
    raw = os.environ.get(name)
    return tuple(int(x) for x in raw.split(",")) if raw else tuple(default)


def run(seeds: Sequence[int], pool: PoolType, settings: DetectorSettings | None = None) -> None:
    """Print the table: one column per K, one row per figure."""
    settings = settings or DetectorSettings()
    free, step5, step10 = _ints("CONFIRM_SIZES", (12, 8, 8))
    ks = _ints("CONFIRM_K", (0, 2))
    sizes = {"free": free, "drift": 0, "step5": step5, "step10": step10, "errors": 0}
    per_k: dict[int, list[dict[str, float]]] = {k: [] for k in ks}
    for seed in seeds:
        histories = seed_set(seed, sizes)
        for k in ks:
            jobs = [(h, settings, k, seed * 1000 + i) for i, h in enumerate(histories)]
            per_k[k].append(figures(histories, pool.map(job, jobs, chunksize=2)))
    print(f"confirmation runs: per seed set {free} change-free, {step5} 5% and {step10} 10% step series")
    print(f"{'figure':<16}" + "".join(f"{'K=' + str(k):>20}" for k in ks))
    for key in per_k[ks[0]][0]:
        cells = []
        for k in ks:
            values = [f[key] for f in per_k[k]]
            fmt = "{:.2f}" if "FA" in key or "delay" in key else "{:.0f}"
            lo, hi = fmt.format(min(values)), fmt.format(max(values))
            cells.append(f"{fmt.format(statistics.fmean(values))} ({lo}-{hi})")
        print(f"{key:<16}" + "".join(f"{c:>20}" for c in cells))
