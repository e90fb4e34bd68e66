"""The dashboards' run-boundary annotations of a sharded run, against a real Prometheus scraping two
shards' real /metrics (loadgen's LiveMetrics on loopback) of one run_id: the start is the earliest
shard start, and the end appears only once both shards have ended, at the latest end (the first
shard to end does not end the run)."""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from grafana.dashgen.queries import interpolate, iter_queries, variable_names
from loadgen.run.live_metrics import LiveMetrics, RunLabels
from tests.integration.test_stack_support import free_port, prom_get, start_prometheus, wait_for

REPO = Path(__file__).resolve().parents[2]
BOARDS = ("run-live.json", "run-comparison.json")
LABELS = RunLabels("20261201T120000Z-shards", "sim", "m", "default")
SCRAPE_S = 1

pytestmark = [pytest.mark.prometheus, pytest.mark.xdist_group("prometheus"), pytest.mark.timeout(120)]


@dataclass
class Shards:
    """Two shards' live metrics and the Prometheus scraping them."""

    url: str
    shards: list[LiveMetrics]


@pytest.fixture(scope="module")
def shards() -> Iterator[Shards]:
    metrics = [LiveMetrics(LABELS, {"seed": "1"}) for _ in range(2)]
    ports = [m.serve(0, "127.0.0.1") for m in metrics]
    config = {
        "global": {"scrape_interval": f"{SCRAPE_S}s", "scrape_timeout": f"{SCRAPE_S}s"},
        "scrape_configs": [
            {"job_name": "loadgen", "static_configs": [{"targets": [f"127.0.0.1:{p}" for p in ports]}]}
        ],
    }
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "prometheus.yml"
        path.write_text(yaml.safe_dump(config))
        port = free_port()
        proc = start_prometheus(path, port, Path(tmp) / "data")
        try:
            yield Shards(f"http://127.0.0.1:{port}", metrics)
        finally:
            proc.terminate()
            proc.wait(10)
            for m in metrics:
                m.watch.mark_end()
                m.stop()


def annotation_exprs(name: str) -> list[str]:
    """The annotation `name`'s query on each run dashboard, its variables set to this run."""
    out = []
    for board_file in BOARDS:
        board = json.loads((REPO / "grafana" / "dashboards" / board_file).read_text())
        (query,) = [q for q in iter_queries(board) if q.kind == "annotation" and q.title == name]
        values = {v: ".*" for v in variable_names(query.expr)}
        values["run_id"] = LABELS.run_id
        out.append(interpolate(query.expr, values))
    return out


def marks(url: str, expr: str, since: float) -> list[dict[str, Any]]:
    """The range query Grafana runs for an annotation, from `since` to now at the scrape step."""
    now = time.time()
    return list(prom_get(url, "query_range", query=expr, start=str(since), end=str(now), step="1"))


def both_scraped(url: str) -> bool:
    result = prom_get(
        url, "query", query=f'count(loadgen_run_start_timestamp_seconds{{run_id="{LABELS.run_id}"}} > 0)'
    )
    return bool(result) and float(result[0]["value"][1]) == 2


def test_a_sharded_run_ends_when_its_last_shard_ends(shards: Shards) -> None:
    first_start = time.time() - 5
    shards.shards[0].start_ts.set(first_start)
    shards.shards[1].start_ts.set(first_start + 1.5)
    wait_for(lambda: both_scraped(shards.url), 30)
    # from here on Prometheus holds both starts (before, a scrape may have seen one shard only)
    since = time.time()

    first_end = time.time()
    shards.shards[0].end_ts.set(first_end)  # shard 0 ends; shard 1 still runs
    naive = f'max by (run_id) (loadgen_run_end_timestamp_seconds{{run_id="{LABELS.run_id}"}} > 0)'
    wait_for(lambda: marks(shards.url, naive, since), 30)  # Prometheus has seen shard 0's end
    time.sleep(2 * SCRAPE_S)
    for expr in annotation_exprs("Run end (Prometheus)"):
        assert marks(shards.url, expr, since) == [], expr  # one shard still runs: no end yet

    time.sleep(1.0)
    last_end = time.time()
    shards.shards[1].end_ts.set(last_end)
    for expr in annotation_exprs("Run end (Prometheus)"):
        series = wait_for(lambda e=expr: marks(shards.url, e, since), 30)
        assert [s["metric"]["run_id"] for s in series] == [LABELS.run_id]  # one mark for the run
        values = {float(v[1]) for v in series[0]["values"]}
        assert len(values) == 1
        assert abs(values.pop() - last_end * 1000) < 1  # at the latest end, not the first
        assert last_end - first_end > 0.5

    for expr in annotation_exprs("Run start (Prometheus)"):
        series = marks(shards.url, expr, since)
        assert [s["metric"]["run_id"] for s in series] == [LABELS.run_id]
        values = {float(v[1]) for v in series[0]["values"]}
        assert len(values) == 1
        assert abs(values.pop() - first_start * 1000) < 1  # the earliest shard start
