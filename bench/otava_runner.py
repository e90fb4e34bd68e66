"""Apache Otava run the way a schedule runs it: after every new run, on the history so far.

Runs in Otava's own virtual environment (it pins numpy), never in infergauge's: it imports nothing of
this project. Reads `{"max_pvalue": P, "series": [[v0, v1, ...], ...]}` as JSON on stdin and writes,
for each series, the alarms a scheduled check would have raised: `[[index, detected_at], ...]`, where
`index` is Otava's change point (first run of the new level) and `detected_at` the newest run of the
first check that reported it. Only changes to a higher value count (the series are latencies).
"""

from __future__ import annotations

import json
import sys
from multiprocessing import Pool

from otava.analysis import compute_change_points  # type: ignore[import-not-found]

FIRST_CHECK = 10  # runs in the history before the first check


def alarms(job: tuple[list[float], float]) -> list[list[int]]:
    """Check after each run; a change point not seen before (none within 1 run) is a new alarm."""
    series, max_pvalue = job
    seen: list[int] = []
    out: list[list[int]] = []
    for n in range(FIRST_CHECK, len(series) + 1):
        points, _ = compute_change_points(series[:n], window_len=50, max_pvalue=max_pvalue)
        for point in points:
            if any(abs(point.index - s) <= 1 for s in seen):
                continue
            seen.append(point.index)
            if point.stats.mean_2 > point.stats.mean_1:
                out.append([int(point.index), n - 1])
    return out


def main() -> None:
    """JSON in, JSON out (see the module docstring)."""
    job = json.load(sys.stdin)
    with Pool() as pool:
        result = pool.map(alarms, [(s, job["max_pvalue"]) for s in job["series"]], chunksize=4)
    json.dump(result, sys.stdout)


if __name__ == "__main__":
    main()
