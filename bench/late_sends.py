"""Where a run's late sends fall in time: spread out (the client short of CPU: every stretch of the run
lags) or bunched in a few short windows (the host stalled the client: a neighbour, the hypervisor, a
pause). Pure: over the `requests.jsonl` lines of one run (`sent_s`, `schedule_lag_s`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

LATE_S = 0.002  # the schedule-lag budget `bench scaling` holds a rate to
WINDOW_S = 0.1
START_S = 0.5  # the first half second: connections opened, code paths run for the first time


@dataclass(frozen=True)
class LateSpread:
    """How many sends were late, in how many windows, how many in the worst one and in the start."""

    sends: int
    late: int
    windows: int
    worst: int
    at_start: int

    def line(self) -> str:
        """`late 54/3200 in 3 windows of 100 ms (worst 40), 0 in the first 0.5 s`."""
        if not self.late:
            return f"late 0/{self.sends}"
        return (
            f"late {self.late}/{self.sends} in {self.windows} windows of {WINDOW_S * 1e3:g} ms "
            f"(worst {self.worst}), {self.at_start} in the first {START_S:g} s"
        )


def late_spread(lines: Sequence[Mapping[str, Any]], late_s: float = LATE_S) -> LateSpread:
    """The spread of the sends later than `late_s` (see module docstring); unsent lines are skipped."""
    sent = [x for x in lines if x.get("sent_s") is not None and x.get("schedule_lag_s") is not None]
    late = [x for x in sent if x["schedule_lag_s"] > late_s]
    if not late:
        return LateSpread(len(sent), 0, 0, 0, 0)
    start = min(x["sent_s"] for x in sent)
    window_us = round(WINDOW_S * 1e6)  # in whole µs: 1.2 // 0.1 is 11.0 in floats
    windows = Counter(round((x["sent_s"] - start) * 1e6) // window_us for x in late)
    at_start = sum(1 for x in late if x["sent_s"] - start < START_S)
    return LateSpread(len(sent), len(late), len(windows), max(windows.values()), at_start)
