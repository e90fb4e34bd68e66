"""`python -m bench.baseline_variants`: the whole-check table's figures for settings variants, on
tuning seed sets (never the reported 101-105), the way docs/baselines.md's "measured and not kept"
rows were measured.

VARIANTS: JSON, name -> DetectorSettings fields to change (default: the defaults alone); SEEDS
(default 901,902); SIZES as BASELINE_SIZES (free,drift,step5,step10,errors; default 40,10,30,30,15:
a size changes which histories a seed set draws, so compare variants at the same sizes); KEYS: the
figures printed (bench.baseline_checks.figures' names).
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from multiprocessing import Pool

from bench.baseline_checks import DEFAULT_SIZES, alarms, env_ints, figures, spread
from bench.check_histories import seed_set, set_sizes
from loadgen.analysis.changepoint import DetectorSettings

KEYS = "FA checks/100,drift FA/100,5% in 3,5% in 5,10% in 3,errors in 5,drift reported"


def main() -> None:
    """One line per variant: each figure as `mean (min-max)` over the seed sets, and the seconds."""
    seeds = env_ints("SEEDS", (901, 902))
    sizes = set_sizes(env_ints("SIZES", DEFAULT_SIZES))
    variants: dict[str, dict[str, object]] = json.loads(os.environ.get("VARIANTS", '{"defaults": {}}'))
    keys = os.environ.get("KEYS", KEYS).split(",")
    with Pool(int(os.environ.get("BENCH_PROCESSES", "2"))) as pool:
        for name, changed in variants.items():
            settings = dataclasses.replace(DetectorSettings(), **changed)  # type: ignore[arg-type]
            started, per_set = time.monotonic(), []
            for seed in seeds:
                histories = seed_set(seed, sizes)
                jobs = [(h, settings, True) for h in histories]
                per_set.append(figures(histories, pool.map(alarms, jobs, chunksize=4)))
            cells = " | ".join(f"{k}: {spread(per_set, k)}" for k in keys)
            print(f"{name:<24} {cells} [{time.monotonic() - started:.0f} s]", flush=True)


if __name__ == "__main__":
    main()
