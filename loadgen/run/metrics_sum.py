"""One /metrics for a run spread over worker processes: the coordinator scrapes each worker's private
endpoint (127.0.0.1) and serves their sum under the same names and labels, with no per-worker label.

Counters and histogram buckets/sums/counts add up; each gauge has its own rule (GAUGE_RULES): in-flight
requests and concurrency shares add up, the start is the earliest, the end is 0 until every worker has
ended, the rest take the largest value.

What it costs the workers: rendering a worker's ~700 samples holds its GIL for several ms (8.5 ms on
the 2-core development VM), which delays its sends, so a worker is scraped in full only when someone
scrapes the coordinator (as a plain run is scraped by Prometheus) and once more when it has ended (its
final counts). The progress line polls only PROGRESS_NAMES (`?name[]=`: a few samples). Expositions
are summed line by line (the text of `name{labels}` is the key; each worker's prometheus_client writes
a series' labels in the same order), and labels are parsed once per series, not once per scrape."""

from __future__ import annotations

import re
import threading
import urllib.request
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any
from urllib.parse import urlencode

from prometheus_client.metrics_core import Metric

# what the coordinator's progress line needs (and the end, to know when to take the final scrape)
PROGRESS_NAMES = (
    "loadgen_requests_total",
    "loadgen_in_flight_requests",
    "loadgen_run_end_timestamp_seconds",
)
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
_UNESCAPE = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}
Fetch = Callable[[str], str | None]


def _end(values: Sequence[float]) -> float:
    """The run's end: 0 while any worker still runs, else the last worker's end."""
    return 0.0 if min(values) <= 0 else max(values)


GAUGE_RULES: dict[str, Callable[[Sequence[float]], float]] = {
    "loadgen_in_flight_requests": sum,
    "loadgen_max_concurrency": sum,
    "loadgen_run_start_timestamp_seconds": min,
    "loadgen_run_end_timestamp_seconds": _end,
}


@dataclass
class Family:
    """One metric family of an exposition: its type, help and samples (`name{labels}` text -> value)."""

    type: str
    help: str = ""
    samples: dict[str, float] = field(default_factory=dict)


def parse_exposition(text: str) -> dict[str, Family]:
    """Families of a text exposition (as prometheus_client writes it) by the name in `# TYPE`."""
    families: dict[str, Family] = {}
    helps: dict[str, str] = {}
    current = Family("untyped")
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name, _, doc = line[7:].partition(" ")
            helps[name] = doc
        elif line.startswith("# TYPE "):
            name, _, kind = line[7:].partition(" ")
            current = families.setdefault(name, Family(kind, helps.get(name, "")))
        elif line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            current.samples[key] = float(value)
    return families


@lru_cache(maxsize=16384)
def sample_labels(key: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    """`name{a="x",b="y"}` -> ("name", (("a", "x"), ("b", "y"))), escapes undone."""
    name, _, rest = key.partition("{")
    pairs = tuple((k, re.sub(r"\\[\\\"n]", lambda m: _UNESCAPE[m[0]], v)) for k, v in _LABEL.findall(rest))
    return name, pairs


def combine(texts: Iterable[str]) -> list[Metric]:
    """The sum of several workers' expositions (text format), family by family."""
    kinds: dict[str, Family] = {}
    values: dict[str, dict[str, list[float]]] = {}
    for text in texts:
        for name, family in parse_exposition(text).items():
            kinds.setdefault(name, family)
            by_key = values.setdefault(name, {})
            for key, value in family.samples.items():
                by_key.setdefault(key, []).append(value)
    out = []
    for name, family in kinds.items():
        metric = Metric(name, family.help, family.type)
        rule: Callable[[Sequence[float]], float] = (
            GAUGE_RULES.get(name, max) if family.type == "gauge" else sum
        )
        for key, seen in values[name].items():
            sample_name, labels = sample_labels(key)
            metric.add_sample(sample_name, dict(labels), rule(seen))
        out.append(metric)
    return out


def fetch_text(url: str) -> str | None:
    """GET `url` (a worker's loopback /metrics), None when it does not answer."""
    try:
        with urllib.request.urlopen(url, timeout=1.0) as response:  # noqa: S310 - loopback URLs
            return str(response.read().decode())
    except OSError:
        return None


def ended(text: str) -> bool:
    """Whether an exposition shows its run's end (`loadgen_run_end_timestamp_seconds` > 0)."""
    family = parse_exposition(text).get("loadgen_run_end_timestamp_seconds")
    return family is not None and any(v > 0 for v in family.samples.values())


class WorkerScrapes:
    """The workers' expositions: a full one per worker on demand (`collect`, when the coordinator is
    scraped), a partial one per `poll` (the progress line's PROGRESS_NAMES), and each worker's final
    full one, taken once a poll sees its end (kept after the worker has gone)."""

    def __init__(self, fetch: Fetch = fetch_text) -> None:
        self.urls: list[str] = []
        self.fetch = fetch
        self.full: dict[str, str] = {}
        self.partial: dict[str, str] = {}
        self.final: dict[str, str] = {}
        self._lock = threading.Lock()
        self._query = "?" + urlencode([("name[]", n) for n in PROGRESS_NAMES])

    def start(self, urls: Sequence[str]) -> None:
        """Scrape these worker URLs from now on."""
        self.urls = list(urls)

    def _running(self) -> list[str]:
        with self._lock:
            return [u for u in self.urls if u not in self.final]

    def poll(self) -> None:
        """One partial round over the running workers; a worker seen ended is scraped in full once
        (its final counts; the worker waits for that scrape before it stops serving)."""
        for url in self._running():
            text = self.fetch(url + self._query)
            if text is None:
                continue
            with self._lock:
                self.partial[url] = text
            if ended(text):
                full = self.fetch(url)
                if full is not None:
                    with self._lock:
                        self.final[url] = self.full[url] = full

    def collect(self) -> list[Metric]:
        """prometheus_client collector: the workers' sum, scraped now (an unreachable worker: its last)."""
        for url in self._running():
            text = self.fetch(url)
            if text is not None:
                with self._lock:
                    self.full[url] = text
        with self._lock:
            texts = list(self.full.values())
        return combine(texts)

    def describe(self) -> list[Any]:
        """No fixed families (the sum is whatever the workers expose)."""
        return []

    def value(self, name: str, **labels: str) -> float:
        """One summed sample's value from the latest polls (0 when absent), for the progress line."""
        with self._lock:
            texts = [self.final.get(u) or self.partial.get(u, "") for u in self.urls]
        total = 0.0
        for text in texts:
            for family in parse_exposition(text).values():
                for key, value in family.samples.items():
                    sample_name, pairs = sample_labels(key)
                    if sample_name == name and all((k, v) in pairs for k, v in labels.items()):
                        total += value
        return total
