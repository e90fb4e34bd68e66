"""`python -m bench.baseline_misses`: which gate of the check holds the steps it misses.

The stepped histories of one step size on tuning seed sets (never the reported 101-105), drawn at
the main table's sizes so they are the same histories `bench.baseline_variants` scores; each one not
found within 3 runs at the defaults is listed with the alarms raised near its step, then decided
again with one setting relaxed at a time, and the line says how many of the misses each relaxation
finds (docs/baselines.md, "Clipping and the 10% target").

SEEDS (default 901-906); STEP (0.10 or 0.05; default 0.10); RELAX: JSON, name -> DetectorSettings
fields (default: no clip, clip 4, alpha doubled, no leave-one-out gate, no min_shift, no trend).
"""

from __future__ import annotations

import dataclasses
import json
import os
from multiprocessing import Pool

from bench.baseline_checks import DEFAULT_SIZES, alarms, env_ints, hit
from bench.check_histories import seed_set, set_sizes
from loadgen.analysis.changepoint import DetectorSettings

RELAX = {
    "no clip": {"clip_after": 100.0},
    "clip_after 4": {"clip_after": 4.0},
    "alpha doubled": {"alpha": 2 * DetectorSettings().alpha},
    "no leave-one-out": {"loo_alpha": 1.0},
    "no min_shift": {"min_shift": 0.0},
    "no trend": {"trend_alpha": 0.0},
}


def main() -> None:
    """The misses of the defaults, then one line per relaxation."""
    seeds = env_ints("SEEDS", range(901, 907))
    step = float(os.environ.get("STEP", "0.10"))
    relax: dict[str, dict[str, float]] = json.loads(os.environ["RELAX"]) if "RELAX" in os.environ else RELAX
    sizes = set_sizes(DEFAULT_SIZES)
    stepped = [h for s in seeds for h in seed_set(s, sizes) if h.kind == "step" and h.step == step]
    defaults = DetectorSettings()
    with Pool(int(os.environ.get("BENCH_PROCESSES", "2"))) as pool:
        found = pool.map(alarms, [(h, defaults, True) for h in stepped], chunksize=4)
        missed = [i for i, (h, (a, _)) in enumerate(zip(stepped, found, strict=True)) if hit(h, a, 3) is None]
        named = ", ".join(map(str, seeds))
        print(f"{len(stepped)} steps of {step:.0%}, seed sets {named}: {len(missed)} not found within 3 runs")
        for i in missed:
            h, at = stepped[i], stepped[i].step_at or 0
            near = sorted((a for a in found[i][0] if abs(a[1] - at) <= 4), key=lambda a: a[2])[:4]
            kind = "decode" if "tpot_p50" in h.moved else "prefill"
            print(f"  #{i} {kind} step at run {at} of {h.runs}, CV {h.cv:.3f}: {near}")
        for name, changed in relax.items():
            settings = dataclasses.replace(defaults, **changed)  # type: ignore[arg-type]
            again = pool.map(alarms, [(stepped[i], settings, True) for i in missed])
            now = [i for i, (a, _) in zip(missed, again, strict=True) if hit(stepped[i], a, 3) is not None]
            print(f"{name:<18} finds {len(now)} of the {len(missed)}: {now}")


if __name__ == "__main__":
    main()
