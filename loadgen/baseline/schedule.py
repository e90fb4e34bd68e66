"""`loadgen baseline schedule`: passes on a cron schedule (croniter), one at a time, with its own metrics.

The loop is pure apart from its three injected parts: the clock (`now`, `sleep_until`), the pass
(returns its outcome and the regressions open after it) and the log. A pass that fails or raises is
counted and logged, and the next one still runs at its time; a pass that overruns its next slot makes
that slot wait until it ends (never two passes at once), and the next time is taken from the end.
Every wait is announced with the time it ends (the first one as soon as the scheduler starts). A pass
stopped by a signal (`loadgen.baseline.stop.PassInterrupted`) is not a failed pass: it ends the loop.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from croniter import croniter
from prometheus_client import CollectorRegistry, Counter, Gauge

OUTCOMES = ("ok", "regression", "failed")
_LAST = "loadgen_baseline_last_pass_timestamp_seconds"
_LAST_OK = "loadgen_baseline_last_pass_success"
_NEXT = "loadgen_baseline_next_pass_timestamp_seconds"
_PASSES = "loadgen_baseline_passes"  # exposed as loadgen_baseline_passes_total
_OPEN = "loadgen_baseline_regressions_open"


class Clock(Protocol):
    """Where the scheduler reads the time and waits."""

    def now(self) -> datetime: ...

    def sleep_until(self, when: datetime) -> None: ...


class WallClock:
    """The real clock (UTC)."""

    def now(self) -> datetime:
        """The current UTC time."""
        return datetime.now(UTC)

    def sleep_until(self, when: datetime) -> None:
        """Sleep until `when` (in short steps, so Ctrl-C is prompt)."""
        while (left := (when - self.now()).total_seconds()) > 0:
            time.sleep(min(left, 1.0))


@dataclass(frozen=True)
class PassOutcome:
    """What the scheduler needs from a pass: ok | regression | failed, and the regressions open."""

    outcome: str
    regressions_open: int


class SchedulerMetrics:
    """The scheduler's own series (docs/METRICS.md), on a private registry."""

    def __init__(self, suite: str, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r, suite_label = self.registry, ["suite"]
        self.last = Gauge(_LAST, "End of the last pass.", suite_label, registry=r)
        self.last_ok = Gauge(
            _LAST_OK, "1 when the last pass ran every series cleanly.", suite_label, registry=r
        )
        self.next = Gauge(_NEXT, "When the next pass starts.", suite_label, registry=r)
        self.passes = Counter(
            _PASSES, "Passes by outcome (ok|regression|failed).", [*suite_label, "outcome"], registry=r
        )
        self.open = Gauge(_OPEN, "Open confirmed regressions after the last check.", suite_label, registry=r)
        self.suite = suite
        for outcome in OUTCOMES:
            self.passes.labels(suite, outcome)

    def finished(self, when: datetime, result: PassOutcome) -> None:
        """Record one pass."""
        self.last.labels(self.suite).set(when.timestamp())
        self.last_ok.labels(self.suite).set(0 if result.outcome == "failed" else 1)
        self.passes.labels(self.suite, result.outcome).inc()
        if result.outcome != "failed":
            self.open.labels(self.suite).set(result.regressions_open)

    def scheduled(self, when: datetime) -> None:
        """Record the next pass's time."""
        self.next.labels(self.suite).set(when.timestamp())


def check_cron(expression: str) -> str:
    """The expression if croniter reads it (5 fields, or 6 with seconds last); else ValueError naming it."""
    if not croniter.is_valid(expression):
        fields = expression.split()
        if len(fields) not in (5, 6):
            raise ValueError(
                f"invalid --cron {expression!r}: {len(fields)} fields; use five cron fields, e.g. '0 2 * * *'"
            )
        raise ValueError(f"invalid --cron {expression!r}: {_bad_field(fields)}")
    return expression


_FIELDS = (
    ("minute", "0-59"),
    ("hour", "0-23"),
    ("day of month", "1-31"),
    ("month", "1-12 or jan-dec"),
    ("day of week", "0-7 or sun-sat"),
    ("second", "0-59"),
)


def _bad_field(fields: list[str]) -> str:
    """Which field croniter rejects: each is tried alone in an all-`*` expression."""
    for position, value in enumerate(fields):
        trial = ["*"] * len(fields)
        trial[position] = value
        if not croniter.is_valid(" ".join(trial)):
            name, valid = _FIELDS[position]
            return f"field {position + 1} ({name}) {value!r} is out of range or unreadable (valid: {valid})"
    return "the fields do not combine into a schedule"


def next_time(expression: str, after: datetime) -> datetime:
    """The first time of the schedule strictly after `after`."""
    return croniter(expression, after).get_next(datetime)


class Scheduler:
    """Runs `run_pass` at every time of `cron`, one pass at a time."""

    def __init__(
        self,
        cron: str,
        run_pass: Callable[[], PassOutcome],
        metrics: SchedulerMetrics,
        *,
        clock: Clock | None = None,
        log: Callable[[str], None] = print,
    ) -> None:
        self.cron, self.run_pass, self.metrics = check_cron(cron), run_pass, metrics
        self.clock, self.log = clock or WallClock(), log

    def run(self, passes: int | None = None) -> None:
        """Loop until `passes` passes ran (None: forever)."""
        done = 0
        due = next_time(self.cron, self.clock.now())
        while passes is None or done < passes:
            self.metrics.scheduled(due)
            self.log(f"next baseline pass at {due.isoformat()}")
            self.clock.sleep_until(due)
            result = self._one(due)
            self.metrics.finished(self.clock.now(), result)
            done += 1
            due = next_time(self.cron, max(self.clock.now(), due))

    def _one(self, due: datetime) -> PassOutcome:
        self.log(f"baseline pass due {due.isoformat()} starting")
        try:
            result = self.run_pass()
        except Exception as exc:  # noqa: BLE001 - a failed pass is counted; the schedule goes on
            self.log(f"error: baseline pass failed: {type(exc).__name__}: {exc}")
            return PassOutcome("failed", 0)
        self.log(f"baseline pass due {due.isoformat()}: {result.outcome}, {result.regressions_open} open")
        return result
