"""The scheduler loop on an injected clock: on time, never overlapping, surviving failures, counting."""

from __future__ import annotations

import os
import re
import signal
import time
from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client import CollectorRegistry

from loadgen.baseline.schedule import PassOutcome, Scheduler, SchedulerMetrics, check_cron
from loadgen.baseline.stop import PassInterrupted, StopSignals

T0 = datetime(2026, 12, 1, 1, 30, tzinfo=UTC)


class Clock:
    """Jumps to each due time; a pass advances it by `pass_s` (a pass may overrun the next slot)."""

    def __init__(self, pass_s: float = 1.0) -> None:
        self.t, self.pass_s, self.waits, self.running = T0, pass_s, [], 0

    def now(self) -> datetime:
        return self.t

    def sleep_until(self, when: datetime) -> None:
        assert self.running == 0  # never waiting while a pass runs
        self.waits.append(when)
        self.t = max(self.t, when)


def _metrics() -> SchedulerMetrics:
    return SchedulerMetrics("s", CollectorRegistry())


def _passes(clock: Clock, outcomes: list[str | None]) -> PassOutcome:
    clock.running += 1
    clock.t += timedelta(seconds=clock.pass_s)
    clock.running -= 1
    outcome = outcomes.pop(0)
    if outcome is None:
        raise RuntimeError("engine host unreachable")
    return PassOutcome(outcome, 1 if outcome == "regression" else 0)


def test_passes_start_at_the_cron_times_and_are_counted() -> None:
    clock, metrics = Clock(), _metrics()
    outcomes: list[str | None] = ["ok", None, "regression"]
    Scheduler("0 2 * * *", lambda: _passes(clock, outcomes), metrics, clock=clock, log=lambda m: None).run(3)
    assert clock.waits == [T0 + timedelta(minutes=30, days=d) for d in range(3)]
    get = metrics.registry.get_sample_value
    assert [
        get("loadgen_baseline_passes_total", {"suite": "s", "outcome": o})
        for o in ("ok", "failed", "regression")
    ] == [
        1,
        1,
        1,
    ]
    assert get("loadgen_baseline_regressions_open", {"suite": "s"}) == 1
    assert get("loadgen_baseline_last_pass_success", {"suite": "s"}) == 1
    assert get("loadgen_baseline_next_pass_timestamp_seconds", {"suite": "s"}) == clock.waits[-1].timestamp()


def test_an_overrunning_pass_delays_the_next_slot_instead_of_overlapping() -> None:
    clock = Clock(pass_s=90 * 60)  # each pass takes 90 minutes; the schedule is hourly
    outcomes: list[str | None] = ["ok", "ok"]
    Scheduler("0 * * * *", lambda: _passes(clock, outcomes), _metrics(), clock=clock, log=lambda m: None).run(
        2
    )
    first = T0 + timedelta(minutes=30)
    assert clock.waits == [first, first + timedelta(hours=2)]  # 03:00 was missed while the pass ran


@pytest.mark.parametrize("bad", ["every night", "61 2 * * *", ""])
def test_a_bad_cron_is_named(bad: str) -> None:
    with pytest.raises(ValueError, match=re.escape(f"invalid --cron {bad!r}")):
        check_cron(bad)


def test_the_scheduler_exposes_what_docs_metrics_lists() -> None:
    import shutil
    import subprocess
    from pathlib import Path

    from prometheus_client import generate_latest

    metrics = _metrics()
    metrics.scheduled(T0)
    metrics.finished(T0, PassOutcome("ok", 0))
    text = generate_latest(metrics.registry).decode()
    names = {
        line.split("{")[0].split(" ")[0] for line in text.splitlines() if line and not line.startswith("#")
    }
    doc = (Path(__file__).resolve().parents[2] / "docs" / "METRICS.md").read_text()
    assert {n for n in names if not n.endswith("_created")} == {n for n in names if f"`{n}`" in doc}, (
        "every exposed series is documented"
    )
    promtool = shutil.which("promtool") or "/usr/bin/promtool"
    checked = subprocess.run(
        [promtool, "check", "metrics"], input=text, capture_output=True, text=True, check=False
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_each_wait_is_announced_with_its_time() -> None:
    clock, lines = Clock(), []
    Scheduler("0 2 * * *", lambda: _passes(clock, ["ok"]), _metrics(), clock=clock, log=lines.append).run(1)
    assert lines[0] == f"next baseline pass at {(T0 + timedelta(minutes=30)).isoformat()}"


def test_an_interrupted_pass_ends_the_loop_and_is_not_a_failed_pass() -> None:
    clock, metrics = Clock(), _metrics()

    def interrupted() -> PassOutcome:
        raise PassInterrupted("pass p interrupted: interrupted by SIGTERM")

    with pytest.raises(PassInterrupted) as caught:
        Scheduler("0 2 * * *", interrupted, metrics, clock=clock, log=lambda m: None).run(3)
    assert caught.value.signal_name == "SIGTERM"
    assert len(clock.waits) == 1  # no second pass
    failed = metrics.registry.get_sample_value(
        "loadgen_baseline_passes_total", {"suite": "s", "outcome": "failed"}
    )
    assert failed == 0


def _terminate_self() -> None:
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(5)  # the handler raises before this ends


def test_stop_signals_raise_outside_a_run_and_give_the_exit_code() -> None:
    stop = StopSignals()
    old = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        stop.install()
        with pytest.raises(KeyboardInterrupt) as caught:
            _terminate_self()
        assert (stop.received, stop.exit_code(caught.value)) == ("SIGTERM", 0)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # what a run's event loop leaves behind
        stop.around(lambda x: x)(1)
        assert signal.getsignal(signal.SIGTERM) == stop._handler
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
    assert StopSignals().exit_code(PassInterrupted("interrupted by SIGINT")) == 130
