"""Live Prometheus metrics of a run, on a private registry served at `--metrics-port` (/metrics).

Names and labels follow the DESIGN.md contract; every series carries `run_id, target, model,
scenario`. Buckets are log-spaced at 24 per decade (ratio ~1.10), so `histogram_quantile`'s
linear interpolation stays within a few percent of the exact percentile.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Gauge
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily
from prometheus_client.utils import floatToGoString

from loadgen.records import OUTCOMES, RequestRecord
from loadgen.run.metrics_http import MetricsServer, ScrapeWatch
from loadgen.stats import NS, e2e_s, itls_s, tpot_s, ttft_s

LABELS = ("run_id", "target", "model", "scenario")
# All interfaces: a Prometheus in docker reaches a loadgen on the host through the host gateway.
# `--metrics-listen-address 127.0.0.1` keeps it on this host (see README, loadgen section).
DEFAULT_LISTEN_ADDRESS = "127.0.0.1"  # loopback unless asked: compose and Kubernetes pass theirs
PER_DECADE = 24


def log_buckets(low: float, high: float, per_decade: int = PER_DECADE) -> list[float]:
    """Log-spaced bucket bounds from low to (at least) high."""
    ratio = 10 ** (1 / per_decade)
    out, value = [], low
    while value < high * (1 + 1e-9):
        out.append(float(f"{value:.6g}"))
        value *= ratio
    if out[-1] < high:
        out.append(high)
    return out


# TTFT/E2E from 100 us: a fast local engine or a prefix-cache hit answers in under 1 ms, and
# histogram_quantile interpolating from 0 in the first bucket is off by up to the bucket's width.
LATENCY_BUCKETS = log_buckets(0.0001, 300.0)
ITL_BUCKETS = log_buckets(0.0005, 5.0)
LAG_BUCKETS = log_buckets(0.00001, 60.0, per_decade=8)
# a --rate inf run schedules every request at its start: the last one waits for a slot about the run
SLOT_WAIT_BUCKETS = log_buckets(0.00001, 3600.0, per_decade=8)


class FastHistogram:
    """One labelled histogram series with an O(log n) `observe` (bisect), exposed like prometheus_client's.

    prometheus_client's Histogram scans its buckets linearly under a lock; with ~130 buckets and one
    observation per token that costs more than the rest of the client's per-token work.
    """

    def __init__(self, name: str, doc: str, bounds: list[float], labels: RunLabels) -> None:
        self.name, self.doc, self.bounds = name, doc, bounds
        self.label_names, self.label_values = list(LABELS), list(labels.values())
        self.counts = [0] * (len(bounds) + 1)  # last slot: above the largest bound (+Inf)
        self.total = 0.0

    def observe(self, value: float) -> None:
        """Count one value (seconds)."""
        self.counts[bisect_left(self.bounds, value)] += 1
        self.total += value

    def observe_many(self, values: list[float]) -> None:
        """Count many values at once (the ITLs of one request): sorted, they are counted per bucket
        spanned (a request's gaps fall in a few buckets), not one by one."""
        if not values:
            return
        self.total = sum(values, self.total)  # same order of additions as one observe per value
        ordered, bounds, counts = sorted(values), self.bounds, self.counts
        last = bisect_left(bounds, ordered[-1])
        done = 0  # values counted so far: those <= bounds[i - 1]
        for i in range(bisect_left(bounds, ordered[0]), last):
            upto = bisect_right(ordered, bounds[i], done)  # bucket i: bounds[i - 1] < v <= bounds[i]
            counts[i] += upto - done
            done = upto
        counts[last] += len(ordered) - done

    def describe(self) -> list[HistogramMetricFamily]:
        return [HistogramMetricFamily(self.name, self.doc, labels=self.label_names)]

    def collect(self) -> list[HistogramMetricFamily]:
        counts, running, buckets = list(self.counts), 0, []
        for bound, count in zip([*self.bounds, math.inf], counts, strict=True):
            running += count
            buckets.append((floatToGoString(bound), running))
        family = HistogramMetricFamily(self.name, self.doc, labels=self.label_names)
        family.add_metric(self.label_values, buckets, self.total)
        return [family]


COUNTERS = (  # name, HELP, labels beyond LABELS
    ("loadgen_requests", "Finished requests by outcome.", ("outcome",)),
    ("loadgen_prompt_tokens", "Prompt tokens of ok requests.", ()),
    ("loadgen_output_tokens", "Output tokens of ok requests.", ()),
    ("loadgen_slo_met_requests", "Ok requests meeting every SLO given.", ()),
)
CACHED_COUNTER = (
    "loadgen_cached_prompt_tokens",
    "Prompt tokens of ok requests the engine reported served from its prefix cache "
    "(usage.prompt_tokens_details.cached_tokens); absent until a response carries it.",
    (),
)


class FastCounters:
    """The run's counters as plain ints (incremented on the event loop, read by the scrape thread under
    the GIL), exposed as prometheus_client's Counters are, less the `_created` samples: its Counter
    takes a lock and makes two checks per increment, three times per request."""

    def __init__(self, labels: RunLabels) -> None:
        self.label_values = list(labels.values())
        self.by_outcome = dict.fromkeys(OUTCOMES, 0)
        self.prompt_tokens = self.output_tokens = self.slo_met = 0
        self.cached_tokens: int | None = None  # None until a response reported cached tokens

    def _families(self) -> list[CounterMetricFamily]:
        return [CounterMetricFamily(name, doc, labels=[*LABELS, *extra]) for name, doc, extra in COUNTERS]

    def _cached_family(self) -> CounterMetricFamily:
        name, doc, extra = CACHED_COUNTER
        return CounterMetricFamily(name, doc, labels=[*LABELS, *extra])

    def describe(self) -> list[CounterMetricFamily]:
        return [*self._families(), self._cached_family()]

    def collect(self) -> list[CounterMetricFamily]:
        requests, prompt, output, slo = families = self._families()
        values = self.label_values
        for outcome, n in list(self.by_outcome.items()):
            requests.add_metric([*values, outcome], n)
        prompt.add_metric(values, self.prompt_tokens)
        output.add_metric(values, self.output_tokens)
        slo.add_metric(values, self.slo_met)
        cached = self.cached_tokens
        if cached is not None:
            family = self._cached_family()
            family.add_metric(values, cached)
            families.append(family)
        return families


class EndMark:
    """The run-end gauge; setting it (> 0) also tells the scrape watch the end is there to be seen."""

    def __init__(self, gauge: Any, watch: ScrapeWatch) -> None:
        self.gauge, self.watch = gauge, watch

    def set(self, value: float) -> None:
        """Set the end time (Unix seconds); 0 means running."""
        self.gauge.set(value)
        if value > 0:
            self.watch.mark_end()


@dataclass
class RunLabels:
    """The four labels every loadgen series carries."""

    run_id: str
    target: str
    model: str
    scenario: str

    def values(self) -> tuple[str, str, str, str]:
        return (self.run_id, self.target, self.model, self.scenario)


class LiveMetrics:
    """The run's metrics; `observe(record)` after each request, gauges set by the runner."""

    def __init__(self, labels: RunLabels, run_info: dict[str, str]) -> None:
        self.registry = CollectorRegistry()
        self.labels = labels
        r, lv = self.registry, labels.values()

        def hist(name: str, doc: str, buckets: list[float]) -> FastHistogram:
            histogram = FastHistogram(name, doc, buckets, labels)
            r.register(histogram)
            return histogram

        def gauge(name: str, doc: str) -> Any:
            return Gauge(name, doc, LABELS, registry=r).labels(*lv)

        self.ttft = hist("loadgen_time_to_first_token_seconds", "Time to first token.", LATENCY_BUCKETS)
        self.tpot = hist(
            "loadgen_time_per_output_token_seconds", "Time per output token after the first.", ITL_BUCKETS
        )
        self.itl = hist(
            "loadgen_inter_token_latency_seconds", "Gap between token-bearing chunks.", ITL_BUCKETS
        )
        self.e2e = hist("loadgen_request_duration_seconds", "End-to-end request latency.", LATENCY_BUCKETS)
        self.lag = hist(
            "loadgen_schedule_lag_seconds",
            "Client lateness: actual send minus due time (scheduled, or when a concurrency slot came free).",
            LAG_BUCKETS,
        )
        self.slot_wait = hist(
            "loadgen_slot_wait_seconds",
            "Wait for a --max-concurrency slot: due time minus scheduled send.",
            SLOT_WAIT_BUCKETS,
        )
        self.counters = FastCounters(labels)
        r.register(self.counters)
        self.in_flight = gauge("loadgen_in_flight_requests", "Requests sent and not finished.")
        self.target_rate = gauge("loadgen_target_request_rate", "Asked request rate (req/s; +Inf for inf).")
        self.max_concurrency = gauge("loadgen_max_concurrency", "Concurrency cap (0 = none).")
        self.loop_lag = gauge("loadgen_event_loop_lag_seconds", "Latest event-loop wake-up delay.")
        self.unparsed_backlog = gauge(
            "loadgen_unparsed_backlog_requests", "Finished requests whose raw reads wait to be parsed."
        )
        self.start_ts = gauge("loadgen_run_start_timestamp_seconds", "Run start (Unix time).")
        self.watch = ScrapeWatch()
        self.end_ts = EndMark(
            gauge("loadgen_run_end_timestamp_seconds", "Run end (Unix time); 0 while running."), self.watch
        )
        info_keys = tuple(LABELS) + tuple(k for k in run_info if k not in LABELS)
        info = Gauge("loadgen_run_info", "Facts of the run; value 1.", info_keys, registry=r)
        info.labels(*lv, *(str(run_info[k]) for k in info_keys[len(LABELS) :])).set(1)
        self._server: MetricsServer | None = None

    def observe_sent(self, record: RequestRecord, late_ns: int) -> None:
        """Account one request as it is handed to the client: its lateness then (actual hand-over
        minus due time; a request readied ahead of its time counts 0) and its slot wait. Observed at
        send, not at completion, so `loadgen_schedule_lag_seconds` (and LoadgenBehindSchedule) move
        while the late requests are still in flight."""
        self.lag.observe(max(late_ns, 0) / NS)
        self.slot_wait.observe(record.slot_wait_ns / NS)

    def observe(self, record: RequestRecord, slo_met: bool) -> None:
        """Account one finished request (warmup requests only move the outcome counter)."""
        counters = self.counters
        counters.by_outcome[record.outcome or "cancelled"] += 1
        if record.outcome != "ok" or record.warmup:
            return
        for hist, value in (
            (self.ttft, ttft_s(record)),
            (self.tpot, tpot_s(record)),
            (self.e2e, e2e_s(record)),
        ):
            if value is not None:
                hist.observe(value)
        self.itl.observe_many(itls_s(record))
        counters.prompt_tokens += record.input_len if record.prompt_tokens is None else record.prompt_tokens
        counters.output_tokens += record.output_tokens
        counters.slo_met += slo_met
        if record.cached_tokens is not None:
            counters.cached_tokens = (counters.cached_tokens or 0) + record.cached_tokens

    def serve(self, port: int, addr: str = DEFAULT_LISTEN_ADDRESS) -> int:
        """Serve /metrics on `addr:port` (0 picks a free port); returns the bound port."""
        self._server = MetricsServer(self.registry, addr, port, self.watch)
        return self._server.address[1]

    @property
    def address(self) -> tuple[str, int] | None:
        """The bound (host, port) while serving."""
        return None if self._server is None else self._server.address

    def stop(self) -> None:
        """Stop serving, once a scrape saw the run's end when someone scrapes (idempotent)."""
        if self._server is not None:
            self._server.stop()
            self._server = None
