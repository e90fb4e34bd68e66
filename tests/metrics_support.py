"""Helper of the live-metrics tests: a run's LiveMetrics that observed ok requests of given TTFTs."""

from __future__ import annotations

from loadgen.records import RequestRecord
from loadgen.run.live_metrics import LiveMetrics, RunLabels


def observed(labels: RunLabels, ttfts: list[float]) -> LiveMetrics:
    """LiveMetrics of `labels` after one ok two-token request per TTFT (seconds) in `ttfts`."""
    metrics = LiveMetrics(labels, {"seed": "1"})
    for i, ttft in enumerate(ttfts):
        record = RequestRecord(i, f"r-{i}", False, 0, 4, 2, sent_ns=1_000, outcome="ok", output_tokens=2)
        record.first_ns = 1_000 + round(ttft * 1e9)
        record.last_ns = record.first_ns + 1_000_000
        record.token_ns = [record.first_ns, record.last_ns]
        metrics.observe(record, False)
    return metrics


def metric_types(exposition: str) -> dict[str, str]:
    """{metric family: its TYPE} of a Prometheus exposition text."""
    import re

    return dict(re.findall(r"^# TYPE (\S+) (\S+)$", exposition, flags=re.M))
