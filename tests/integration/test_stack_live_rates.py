"""Live rates from the first 15 s of a run, and the run's end seen, with a real Prometheus.

A 40 s loadgen run at 10 req/s (constant arrivals: the check is of the rule, not of Poisson noise)
against the simulated engine, scraped and evaluated at the shipped 5 s intervals. A 1-minute rate()
over the younger series read about half (4.64 at 28 s of a 9.94 req/s run, issue 13 item 9).
The run lingers 0 s: loadgen must still wait for one scrape of its end, so Prometheus can tell the
finished run from one that vanished.
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.integration.test_stack_support import free_port, prom_get, start_prometheus, wait_for  # noqa: E402

RATE = 10.0
DURATION_S = 40.0
FROM_S = 15.0
TOLERANCE = 0.10
VANISHED = "LoadgenRunVanished"

pytestmark = [pytest.mark.prometheus, pytest.mark.xdist_group("prometheus"), pytest.mark.timeout(180)]


def shipped_config(loadgen: str) -> dict[str, Any]:
    """prometheus.local.yml as shipped (its intervals and rules), scraping only this test's loadgen."""
    config = yaml.safe_load((REPO / "prometheus" / "prometheus.local.yml").read_text())
    config["rule_files"] = [str(REPO / "prometheus" / "rules" / "*.yml")]
    job = next(j for j in config["scrape_configs"] if j["job_name"] == "loadgen")
    job["static_configs"] = [{"targets": [loadgen]}]
    config["scrape_configs"] = [job]
    return config


def interval_s(config: dict[str, Any], key: str) -> float:
    value = str(config["global"][key])
    assert value.endswith("s"), value
    assert value[:-1].isdigit(), value
    return float(value[:-1])


def epoch(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


@pytest.fixture(scope="module")
def run() -> Iterator[dict[str, Any]]:
    from loadgen.config import RunConfig
    from loadgen.run.runner import run_benchmark_sync
    from simengine.embedded import EmbeddedEngine

    with (
        tempfile.TemporaryDirectory(prefix="infergauge-rates-") as tmp,
        EmbeddedEngine(["--personality", "vllm", "--time-scale", "20", "--max-num-seqs", "64"]) as engine,
    ):
        loadgen_port, prom_port = free_port(), free_port()
        config = shipped_config(f"127.0.0.1:{loadgen_port}")
        (Path(tmp) / "prometheus.yml").write_text(yaml.safe_dump(config))
        prom = start_prometheus(Path(tmp) / "prometheus.yml", prom_port, Path(tmp) / "tsdb")
        try:
            run_config = RunConfig(
                target="vllm",
                base_url=engine.base_url,
                profile="short",
                rate=RATE,
                arrival="constant",
                duration_s=DURATION_S,
                seed=3,
                metrics_port=loadgen_port,
                linger_s=0.0,
                results_dir=str(Path(tmp) / "results"),
                scenario="live-rates",
            )
            result = run_benchmark_sync(run_config, progress=False)
            url = f"http://127.0.0.1:{prom_port}"
            sel = f'{{run_id="{result.run_id}"}}'
            # the rules evaluated on the last scrape (one evaluation interval after it at most)
            wait_for(
                lambda: prom_get(
                    url, "query", query=f"max_over_time(run_id:loadgen_run_elapsed:seconds{sel}[1m])"
                ),
                2 * interval_s(config, "evaluation_interval") + 5,
            )
            time.sleep(interval_s(config, "evaluation_interval") + 1)
            yield {"url": url, "sel": sel, "summary": result.summary, "config": config}
        finally:
            prom.terminate()
            prom.wait(timeout=10)


def test_achieved_rate_is_right_from_15_s_on(run: dict[str, Any]) -> None:
    summary = run["summary"]
    start, end = epoch(summary["started_at"]), epoch(summary["ended_at"])
    step = interval_s(run["config"], "evaluation_interval")
    points = prom_get(
        run["url"],
        "query_range",
        query=f"run_id:loadgen_requests_ok:rate1m{run['sel']}",
        start=f"{start + FROM_S:.3f}",
        end=f"{end:.3f}",
        step=f"{step:.0f}",
    )
    assert len(points) == 1, points
    readings = {round(float(t) - start, 1): float(v) for t, v in points[0]["values"]}
    assert len(readings) >= (DURATION_S - FROM_S) // step - 2, f"too few readings: {readings}"
    achieved = summary["request_throughput"]
    assert achieved == pytest.approx(RATE, rel=TOLERANCE)
    off = {t: v for t, v in readings.items() if abs(v - achieved) > TOLERANCE * achieved}
    assert off == {}, f"achieved {achieved:.2f} req/s; readings off by more than 10%: {off}"


def test_the_finished_run_is_seen_to_finish(run: dict[str, Any]) -> None:
    # linger 0: loadgen waited for one scrape of its end mark before it stopped serving
    ended = prom_get(
        run["url"], "query", query=f"max_over_time(loadgen_run_end_timestamp_seconds{run['sel']}[5m])"
    )
    assert ended
    assert float(ended[0]["value"][1]) == pytest.approx(epoch(run["summary"]["ended_at"]), abs=1)
    rules = prom_get(run["url"], "rules", type="alert")["groups"]
    vanished = [r for g in rules for r in g["rules"] if r["name"] == VANISHED]
    assert len(vanished) == 1
    assert prom_get(run["url"], "query", query=vanished[0]["query"]) == []
