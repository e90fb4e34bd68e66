"""`make bench` (baseline): how well `loadgen baseline check` finds regressions, against simpler rules
and Apache Otava, on seeded synthetic histories (bench/histories.py).

Every detector is run the way a schedule uses it: after each new run, on the history so far; an alarm
is (placed index, the newest run when it was raised). Figures, per detector:
  - false alarms per 100 step-free runs (alarms on series with no step);
  - recall within 3 and 5 runs: share of series with a step where an alarm placed within 2 runs of the
    step was raised by the 3rd (5th) run at the new level;
  - exact placement: share of those found (within 5) placed at the first run of the new level.
    Its ceiling from run values alone (both levels known, the likeliest split) is printed beside it.
Detectors: infergauge (loadgen/analysis/changepoint.py, confirmed changes only), "infergauge +
manifest" (the same alarms placed as `baseline check` places them, at the one environment change within
two runs, on histories whose step starts at an environment change among unrelated ones), "previous +10%"
(a run 10% worse than the one before), "median-5 +10%" (10% worse than the median of the 5 before),
and Apache Otava 0.8.0 at several p-value thresholds, in its own virtual environment (it pins numpy,
so it is never a dependency of this project; BENCH_OTAVA=0 skips it, and without network to install
it the bench says so).
Sizes: BASELINE_SERIES series per (noise, step) cell (default 60), seeded: the same figures every run.
"""

from __future__ import annotations

import json
import math
import os
import random
import statistics
import subprocess
import sys
import time
import venv
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from multiprocessing import Pool
from pathlib import Path

from bench.histories import History, history
from loadgen.analysis.changepoint import raised
from loadgen.baseline.check import snapped

CVS = (0.02, 0.03, 0.04, 0.06, 0.10)
STEPS = (0.03, 0.05, 0.10, 0.20)
TARGET_CVS = (0.02, 0.03, 0.04)  # the noise the targets are stated at
OTAVA = "apache-otava==0.8.0"
OTAVA_PVALUES = (0.001, 0.0001, 0.00001)  # 0.001 is Otava's default
Alarm = tuple[int, int]  # (index placed, detected at)
# "infergauge + manifest": each step starts at a recorded environment change (the upgrade that caused
# it), and unrelated ones (a driver, a flag that moves nothing) start at this share of the runs
ENV_CHANGE_RATE = 0.05


@dataclass(frozen=True)
class Score:
    """One detector's figures over one set of histories."""

    false_alarms_per_100: float
    recall3: float
    recall5: float
    exact: float
    found: int


def infergauge_alarms(values: Sequence[float]) -> list[Alarm]:
    """Confirmed regressions of the check as a schedule saw them raised, one later revised included
    (the series are latencies: higher is worse)."""
    return [(c.index, c.detected_at) for c in raised(values, higher_is_better=False) if c.worse]


def previous_run_alarms(values: Sequence[float]) -> list[Alarm]:
    """A run 10% worse than the previous one."""
    return [(i, i) for i in range(1, len(values)) if values[i] > 1.10 * values[i - 1]]


def median5_alarms(values: Sequence[float]) -> list[Alarm]:
    """A run 10% worse than the median of the 5 before it."""
    return [(i, i) for i in range(5, len(values)) if values[i] > 1.10 * statistics.median(values[i - 5 : i])]


def found(alarms: list[Alarm], step_at: int, within: int) -> Alarm | None:
    """The first alarm placed within 2 runs of the step and raised by the `within`-th run after it."""
    for index, detected_at in alarms:
        if abs(index - step_at) <= 2 and step_at <= detected_at <= step_at + within - 1:
            return (index, detected_at)
    return None


def score(histories: list[History], alarms: list[list[Alarm]]) -> Score:
    """Figures over paired histories and their alarms (step-free histories give the false alarms)."""
    free = [(h, a) for h, a in zip(histories, alarms, strict=True) if h.step_at is None]
    stepped = [(h, a) for h, a in zip(histories, alarms, strict=True) if h.step_at is not None]
    runs = sum(len(h.values) for h, _ in free)
    false_alarms = sum(len(a) for _, a in free)
    hits3 = [found(a, h.step_at, 3) for h, a in stepped if h.step_at is not None]
    hits5 = [(found(a, h.step_at, 5), h.step_at) for h, a in stepped if h.step_at is not None]
    exact = [hit[0] == step_at for hit, step_at in hits5 if hit is not None]
    n = max(len(stepped), 1)
    return Score(
        false_alarms_per_100=100 * false_alarms / runs if runs else float("nan"),
        recall3=sum(h is not None for h in hits3) / n,
        recall5=len(exact) / n,
        exact=sum(exact) / len(exact) if exact else float("nan"),
        found=len(exact),
    )


def environment_changes(h: History, i: int) -> frozenset[int]:
    """The runs of history `i` that start a changed environment: its step's run and unrelated ones at
    ENV_CHANGE_RATE (seeded per history, apart from the values' generator)."""
    rng = random.Random(f"env:{i}")
    out = {j for j in range(1, len(h.values)) if rng.random() < ENV_CHANGE_RATE}
    if h.step_at is not None:
        out.add(h.step_at)
    return frozenset(out)


def with_manifest(histories: list[History], alarms: list[list[Alarm]]) -> list[list[Alarm]]:
    """The check's alarms placed as `baseline check` places them: at the one environment change within
    two runs, when there is exactly one (loadgen.baseline.check.snapped)."""
    out = []
    for i, (h, found_alarms) in enumerate(zip(histories, alarms, strict=True)):
        changed = environment_changes(h, i)
        out.append([(snapped(at, len(h.values), changed.__contains__), when) for at, when in found_alarms])
    return out


def histories_for(cvs: Sequence[float], steps: Sequence[float], per_cell: int, seed: int) -> list[History]:
    """Step-free histories (2 per cell's worth at each noise level) and stepped ones, seeded."""
    rng = random.Random(seed)
    out = [history(rng, cv=cv) for cv in cvs for _ in range(2 * per_cell)]
    out += [history(rng, cv=cv, step=step) for step in steps for cv in cvs for _ in range(per_cell)]
    return out


def run_local(
    detector: Callable[[Sequence[float]], list[Alarm]], histories: list[History]
) -> list[list[Alarm]]:
    """Alarms of an in-process detector, one series per task."""
    with Pool() as pool:
        return pool.map(detector, [h.values for h in histories], chunksize=8)


def otava_python() -> Path | str:
    """Otava's own virtual environment (made once under ~/.cache); a reason string when impossible."""
    home = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "infergauge-bench" / "otava-0.8.0"
    python = home / "bin" / "python"
    if python.exists():
        return python
    try:
        venv.create(home, with_pip=True)
        subprocess.run(
            [
                str(python),
                "-m",
                "pip",
                "install",
                "-q",
                "--no-deps",
                OTAVA,
                "numpy==2.2.*",
                "scipy>=1.16,<1.17",
            ],
            check=True,
            capture_output=True,
            timeout=600,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return f"cannot install {OTAVA} in its own environment ({type(exc).__name__})"
    return python


def run_otava(python: Path, histories: list[History], max_pvalue: float) -> list[list[Alarm]]:
    """Otava's alarms for every history, checked after each run (bench/otava_runner.py)."""
    job = json.dumps({"max_pvalue": max_pvalue, "series": [h.values for h in histories]})
    runner = Path(__file__).with_name("otava_runner.py")
    done = subprocess.run([str(python), str(runner)], input=job, capture_output=True, text=True, check=True)
    return [[(int(i), int(d)) for i, d in series] for series in json.loads(done.stdout)]


def placed_by_oracle(h: History, base: float = 0.05) -> bool:
    """Knowing both levels, is the likeliest split within 2 runs of the step the step?
    (an upper bound on exact placement from run values alone: a run next to the step that reads
    nearer the other level is misplaced by any detector)."""
    if h.step_at is None:
        return False
    at, low, high = h.step_at, math.log(base), math.log(base * (1 + h.step))
    logs = [math.log(v) for v in h.values[at - 3 : at + 3]]  # runs at-3 .. at+2

    def error(k: int) -> float:  # split k runs after at-3: runs before it at the low level
        return sum((x - (low if i < k else high)) ** 2 for i, x in enumerate(logs))

    return min(range(1, 6), key=error) == 3


def row(name: str, s: Score) -> str:
    return (
        f"{name:<24} {s.false_alarms_per_100:9.2f} {100 * s.recall3:9.0f}% {100 * s.recall5:9.0f}% "
        f"{100 * s.exact:9.0f}%  {s.found:5d}"
    )


HEADER = f"{'detector':<24} {'FA/100':>9} {'within 3':>10} {'within 5':>10} {'exact':>10}  found"


def grid_table(per_cell: int) -> None:
    """infergauge and the naive rules over every noise level and step size."""
    histories = histories_for(CVS, STEPS, per_cell, seed=7)
    detectors = {"infergauge": infergauge_alarms, "previous +10%": previous_run_alarms}
    detectors["median-5 +10%"] = median5_alarms
    alarms = {name: run_local(fn, histories) for name, fn in detectors.items()}
    print(f"all cells: CV {', '.join(f'{c:.0%}' for c in CVS)}; steps {', '.join(f'{s:.0%}' for s in STEPS)}")
    print(f"{'step / CV':<12}" + "".join(f"{f'{c:.0%}':>14}" for c in CVS) + "   (infergauge: within 3 / 5)")
    for step in STEPS:
        cells = []
        for cv in CVS:
            pick = [i for i, h in enumerate(histories) if h.step == step and h.cv == cv]
            s = score([histories[i] for i in pick], [alarms["infergauge"][i] for i in pick])
            cells.append(f"{100 * s.recall3:5.0f}/{100 * s.recall5:3.0f}%")
        print(f"{f'{step:.0%}':<12}" + "".join(f"{c:>14}" for c in cells))
    print(HEADER)
    for name in detectors:
        print(row(name, score(histories, alarms[name])))


def target_table(per_cell: int) -> None:
    """The issue's targets (CV 2-4%, steps of 5% and 10%), every detector, Otava included."""
    base = histories_for(TARGET_CVS, (), per_cell, seed=11)
    five = histories_for(TARGET_CVS, (0.05,), per_cell, seed=12)[len(base) :]
    ten = histories_for(TARGET_CVS, (0.10,), per_cell, seed=13)[len(base) :]
    histories = base + five + ten
    checked = run_local(infergauge_alarms, histories)
    results: dict[str, list[list[Alarm]]] = {
        "infergauge": checked,
        "infergauge + manifest": with_manifest(histories, checked),
        "previous +10%": run_local(previous_run_alarms, histories),
        "median-5 +10%": run_local(median5_alarms, histories),
    }
    python = otava_python() if os.environ.get("BENCH_OTAVA", "1") != "0" else "skipped (BENCH_OTAVA=0)"
    if isinstance(python, Path):
        for p in OTAVA_PVALUES:
            started = time.monotonic()
            results[f"otava p<{p:g}"] = run_otava(python, histories, p)
            print(f"  (otava p<{p:g}: {time.monotonic() - started:.0f} s)")
    else:
        print(f"  Apache Otava: {python}")
    print("targets: CV 2-4%, step-free / 5% / 10% steps; FA per 100 step-free runs")
    print(f"{'detector':<24} {'FA/100':>9} {'5% in 3':>9} {'5% in 5':>9} {'10% in 3':>9} {'exact':>9}")
    n = len(base)
    for name, alarms in results.items():
        s5 = score(base + five, alarms[: n + len(five)])
        s10 = score(base + ten, alarms[:n] + alarms[n + len(five) :])
        found = s5.found + s10.found
        exact = (s5.exact * s5.found + s10.exact * s10.found) / found if found else float("nan")
        print(
            f"{name:<24} {s5.false_alarms_per_100:9.2f} {100 * s5.recall3:8.0f}% {100 * s5.recall5:8.0f}% "
            f"{100 * s10.recall3:8.0f}% {100 * exact:8.0f}%"
        )
    ceiling = statistics.fmean(placed_by_oracle(h) for h in five + ten)
    print(f"exact placement ceiling (both levels known, every stepped series): {ceiling:.0%}")
    print(
        "infergauge + manifest: each step at a recorded environment change, unrelated ones at "
        f"{ENV_CHANGE_RATE:.0%} of runs; a change is placed at the one within 2 runs (as baseline check)"
    )


def main() -> None:
    """The whole-check protocol (bench/baseline_checks.py); with BASELINE_SINGLE=1 also the
    single-series tables below (one metric at a time, Otava beside it)."""
    from bench import baseline_checks

    baseline_checks.main()
    if os.environ.get("BASELINE_SINGLE") == "1":
        single_series()


def single_series() -> None:
    """Print both single-series tables."""
    per_cell = int(os.environ.get("BASELINE_SERIES", "60"))
    started = time.monotonic()
    print(f"{per_cell} seeded histories per cell, 30-60 runs each, 2% single outliers (15-40%)")
    target_table(per_cell)
    grid_table(per_cell)
    print(f"({time.monotonic() - started:.0f} s; python {sys.version.split()[0]})")
