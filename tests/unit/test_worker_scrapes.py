"""A `--workers` coordinator's view of its workers' /metrics: the line-by-line sum equals the one of
prometheus_client's parser, labels are unescaped, the progress line polls a few samples, a worker's
final counts are taken once its end is seen, and a partial poll is never the scrape of the end."""

from __future__ import annotations

import threading
import time
import urllib.request
from collections import Counter

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from loadgen.run.live_metrics import LiveMetrics, RunLabels
from loadgen.run.metrics_sum import PROGRESS_NAMES, WorkerScrapes, combine, parse_exposition, sample_labels
from loadgen.scale.pinning import physical_first, plan_cores
from tests.metrics_support import observed


def NO_SMT(cpu: int) -> str | None:  # noqa: N802 - a constant-like topology: every CPU its own core
    return None


LABELS = RunLabels("r", "sim", 'a "quoted" \\ model', "s")


def _metrics(ttfts: list[float], ended: float = 0.0) -> LiveMetrics:
    metrics = observed(LABELS, ttfts)
    metrics.end_ts.set(ended)
    return metrics


def _text(metrics: LiveMetrics) -> str:
    return generate_latest(metrics.registry).decode()


def _reference_sum(texts: list[str]) -> Counter[tuple[str, tuple[tuple[str, str], ...]]]:
    """Counters and histogram samples summed over prometheus_client's own parse of each text."""
    total: Counter[tuple[str, tuple[tuple[str, str], ...]]] = Counter()
    for text in texts:
        for family in text_string_to_metric_families(text):
            if family.type in ("counter", "histogram"):
                for s in family.samples:
                    total[(s.name, tuple(sorted(s.labels.items())))] += s.value
    return total


def test_the_line_sum_is_the_sum_of_prometheus_clients_parse() -> None:
    texts = [_text(_metrics([0.01, 0.02])), _text(_metrics([0.05, 0.3, 2.0]))]
    ours: Counter[tuple[str, tuple[tuple[str, str], ...]]] = Counter()
    for family in combine(texts):
        if family.type in ("counter", "histogram"):
            for s in family.samples:
                ours[(s.name, tuple(sorted(s.labels.items())))] += s.value
    reference = _reference_sum(texts)
    assert ours == reference
    ok = [
        v
        for (name, labels), v in ours.items()
        if name == "loadgen_requests_total" and ("outcome", "ok") in labels
    ]
    assert ok == [5]  # 2 + 3 requests, one series


def test_labels_are_unescaped_as_written() -> None:
    key = next(k for k in parse_exposition(_text(_metrics([])))["loadgen_run_info"].samples)
    name, pairs = sample_labels(key)
    assert name == "loadgen_run_info"
    assert dict(pairs)["model"] == 'a "quoted" \\ model'


class _Workers:
    """Two workers' real expositions behind a fetch that records what was asked."""

    def __init__(self) -> None:
        self.metrics = {"w0": _metrics([0.01]), "w1": _metrics([0.02, 0.03])}
        self.asked: list[str] = []

    def fetch(self, url: str) -> str | None:
        self.asked.append(url)
        base, _, query = url.partition("?")
        metrics = self.metrics[base]
        if not query:
            return _text(metrics)
        names = [n for n in PROGRESS_NAMES if n in query]
        return generate_latest(metrics.registry.restricted_registry(names)).decode()


def test_polls_are_partial_and_a_worker_seen_ended_is_scraped_once_in_full() -> None:
    workers = _Workers()
    scrapes = WorkerScrapes(workers.fetch)
    scrapes.start(["w0", "w1"])
    scrapes.poll()
    assert all("?" in url for url in workers.asked)  # no full render while the run goes
    assert scrapes.value("loadgen_requests_total", outcome="ok") == 3
    workers.metrics["w0"].end_ts.set(100.0)
    workers.asked.clear()
    scrapes.poll()
    assert workers.asked == [workers.asked[0], "w0", workers.asked[2]]  # w0's final full scrape
    workers.asked.clear()
    scrapes.poll()
    assert [u.partition("?")[0] for u in workers.asked] == ["w1"]  # an ended worker is not polled again
    del workers.metrics["w0"]  # gone: its final exposition stays in the sum
    summed = {s.name: s.value for f in scrapes.collect() for s in f.samples if not s.labels.get("le")}
    assert summed["loadgen_time_to_first_token_seconds_count"] == 3
    assert summed["loadgen_run_end_timestamp_seconds"] == 0  # w1 still runs


def test_a_partial_poll_is_not_the_scrape_that_saw_the_end() -> None:
    metrics = _metrics([])
    port = metrics.serve(0, "127.0.0.1")
    url = f"http://127.0.0.1:{port}/metrics"
    query = "?name[]=loadgen_run_end_timestamp_seconds"
    with urllib.request.urlopen(url + query, timeout=5) as resp:
        resp.read()
    metrics.end_ts.set(100.0)
    started = time.monotonic()
    stopper = threading.Thread(target=metrics.stop)
    stopper.start()
    time.sleep(0.2)
    with urllib.request.urlopen(url + query, timeout=5) as resp:  # shows the end, partially
        assert b"100.0" in resp.read()
    assert stopper.is_alive()  # still waiting for a full one
    with urllib.request.urlopen(url, timeout=5) as resp:
        resp.read()
    stopper.join(10)
    assert not stopper.is_alive()
    assert time.monotonic() - started < 5.0  # ended by the full scrape, not by the wait's bound


def test_each_worker_gets_its_own_core_and_the_coordinator_one_more_when_there_are_enough() -> None:
    plan = plan_cores([4, 5, 6, 7], 3, NO_SMT)
    assert plan.coordinator == (4,)
    assert plan.workers == (5, 6, 7)
    shared = plan_cores([0, 1], 2, NO_SMT)  # no core left: the coordinator is not pinned
    assert shared.coordinator is None
    assert shared.workers == (0, 1)
    assert plan_cores([0, 1], 3, NO_SMT).workers == (0, 1, 0)
    assert plan_cores([], 2, NO_SMT).workers == (None, None)
    assert plan.describe()["workers"] == [5, 6, 7]


def test_workers_take_one_cpu_per_physical_core_before_a_second_thread() -> None:
    pairs = {c: f"{c - c % 2},{c - c % 2 + 1}" for c in range(8)}  # siblings 0,1  2,3  4,5  6,7
    plan = plan_cores(range(8), 4, pairs.get)
    assert plan.coordinator == (0,)
    assert plan.workers == (2, 4, 6, 1)  # four physical cores' first threads, then a second thread
    assert physical_first(range(8), pairs.get) == [0, 2, 4, 6, 1, 3, 5, 7]
    apart = {c: f"{c % 4},{c % 4 + 4}" for c in range(8)}  # siblings 0,4  1,5 ...: numbering already apart
    assert physical_first(range(8), apart.get) == [0, 1, 2, 3, 4, 5, 6, 7]
    assert physical_first([3, 1], NO_SMT) == [1, 3]
