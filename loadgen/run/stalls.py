"""Host stalls: stretches when loadgen's event loop did not run (the process SIGSTOP'd, the host's
CPU starved by other work, a VM paused, or loadgen itself busy), told apart from a slow engine.

A slow engine makes requests slow while the client's loop keeps running; a stalled host makes them
slow *because* the client stopped reading. The monitor expects to wake every 0.25 s; when it (or the
finisher, which looks at the monitor's overdue wake) finds the loop woke more than STALL_NS late,
the stretch [expected wake, actual wake] is a stall. Each request's line gets `host_stall_s`: the
seconds of stalls overlapping its [sent, done] window, so its latency can be read against them; the
summary's `host_stalls` counts them. Pure bookkeeping over perf_counter_ns values (no clock here).
"""

from __future__ import annotations

from typing import Any

from loadgen.records import RequestRecord
from loadgen.stats import NS

STALL_NS = 50_000_000  # a loop late by 50 ms is no scheduling jitter (typical lag: 0.1-5 ms)


class Stalls:
    """The run's host stalls as (start_ns, end_ns), in time order."""

    def __init__(self) -> None:
        self.spans: list[tuple[int, int]] = []
        self.expected_ns = 0  # when the monitor expects to wake next (0: not running)

    def woke(self, expected_ns: int, now_ns: int) -> None:
        """A wake-up `now_ns` of one that was due at `expected_ns`: a stall when late by STALL_NS."""
        if expected_ns and now_ns - expected_ns >= STALL_NS:
            spans = self.spans
            if spans and spans[-1][0] == expected_ns:  # the same stall seen again: it lasted longer
                spans[-1] = (expected_ns, max(spans[-1][1], now_ns))
            else:
                spans.append((expected_ns, now_ns))

    def overdue(self, now_ns: int) -> None:
        """Seen from outside the monitor: if its wake is overdue by STALL_NS, a stall just ended."""
        self.woke(self.expected_ns, now_ns)

    def overlap_ns(self, start_ns: int, end_ns: int) -> int:
        """Nanoseconds of stalls inside [start_ns, end_ns]."""
        total = 0
        for lo, hi in reversed(self.spans):
            if hi <= start_ns:
                break
            total += max(0, min(hi, end_ns) - max(lo, start_ns))
        return total

    def stamp(self, record: RequestRecord) -> None:
        """Set the record's `host_stall_ns` from the stalls during its flight."""
        if record.sent_ns and record.done_ns and self.spans:
            record.host_stall_ns = self.overlap_ns(record.sent_ns, record.done_ns)

    def report(self, records: list[RequestRecord]) -> dict[str, Any]:
        """The summary's `host_stalls`: how many, their total and longest (s), requests they touched."""
        lengths = [(hi - lo) / NS for lo, hi in self.spans]
        return {
            "count": len(lengths),
            "total_s": sum(lengths),
            "max_s": max(lengths, default=0.0),
            "threshold_s": STALL_NS / NS,
            "requests_affected": sum(1 for r in records if r.host_stall_ns > 0),
        }
