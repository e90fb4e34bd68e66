"""The live metrics of a run nobody can read (`--metrics-port 0`): the same members as LiveMetrics,
doing nothing, so such a run neither imports prometheus_client (~15 ms of CPU at every start) nor
spends anything per request on histograms no scrape will see."""

from __future__ import annotations

from loadgen.records import RequestRecord


class NullGauge:
    """A gauge nobody reads."""

    def set(self, value: float) -> None:
        """Ignore the value."""


class UnservedMetrics:
    """LiveMetrics' members for an unserved run (module docstring)."""

    address: tuple[str, int] | None = None

    def __init__(self) -> None:
        self.in_flight = self.target_rate = self.max_concurrency = NullGauge()
        self.loop_lag = self.unparsed_backlog = self.start_ts = self.end_ts = NullGauge()

    def observe_sent(self, record: RequestRecord, late_ns: int) -> None:
        """Nothing: no histogram to count into."""

    def observe(self, record: RequestRecord, slo_met: bool) -> None:
        """Nothing: no histogram to count into."""

    def stop(self) -> None:
        """Nothing to stop."""
