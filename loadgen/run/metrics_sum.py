"""One /metrics for a run spread over worker processes: the coordinator scrapes each worker's private
endpoint (127.0.0.1) and serves their sum under the same names and labels, with no per-worker label.

Counters and histogram buckets/sums/counts add up; each gauge has its own rule (GAUGE_RULES): in-flight
requests and concurrency shares add up, the start is the earliest, the end is 0 until every worker has
ended, the rest take the largest value."""

from __future__ import annotations

import threading
import urllib.request
from collections.abc import Callable, Sequence
from typing import Any

from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families


def _end(values: Sequence[float]) -> float:
    """The run's end: 0 while any worker still runs, else the last worker's end."""
    return 0.0 if min(values) <= 0 else max(values)


GAUGE_RULES: dict[str, Callable[[Sequence[float]], float]] = {
    "loadgen_in_flight_requests": sum,
    "loadgen_max_concurrency": sum,
    "loadgen_run_start_timestamp_seconds": min,
    "loadgen_run_end_timestamp_seconds": _end,
}


def combine(texts: Sequence[str]) -> list[Metric]:
    """The sum of several workers' expositions (text format), family by family."""
    families: dict[str, Metric] = {}
    values: dict[tuple[str, str, tuple[tuple[str, str], ...]], list[float]] = {}
    for text in texts:
        for family in text_string_to_metric_families(text):
            families.setdefault(family.name, Metric(family.name, family.documentation, family.type))
            for sample in family.samples:
                key = (family.name, sample.name, tuple(sorted(sample.labels.items())))
                values.setdefault(key, []).append(sample.value)
    for (family_name, sample_name, labels), seen in values.items():
        family = families[family_name]
        rule = GAUGE_RULES.get(family_name, max) if family.type == "gauge" else sum
        family.add_sample(sample_name, dict(labels), rule(seen))
    return list(families.values())


class WorkerScrapes:
    """The latest exposition of each worker (scraped every `interval_s` in a daemon thread); a worker
    that has stopped keeps its last one, so the sum still holds its final counts."""

    def __init__(self, interval_s: float = 0.5) -> None:
        self.urls: list[str] = []
        self.texts: dict[str, str] = {}
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self, urls: Sequence[str]) -> None:
        """Scrape these worker URLs from now on."""
        self.urls = list(urls)
        self._thread.start()

    def scrape_all(self) -> None:
        """One round over the workers (an unreachable one keeps its last text)."""
        for url in self.urls:
            try:
                with urllib.request.urlopen(url, timeout=1.0) as response:  # noqa: S310 - loopback URLs
                    self.texts[url] = response.read().decode()
            except OSError:
                continue

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.scrape_all()

    def stop(self) -> None:
        """Stop scraping (after one last round)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self.scrape_all()

    def collect(self) -> list[Metric]:
        """prometheus_client collector: the workers' sum."""
        return combine(list(self.texts.values()))

    def describe(self) -> list[Any]:
        """No fixed families (the sum is whatever the workers expose)."""
        return []

    def value(self, name: str, **labels: str) -> float:
        """One summed sample's value (0 when absent), e.g. for the progress line."""
        total = 0.0
        for family in self.collect():
            for sample in family.samples:
                if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                    total += sample.value
        return total
