"""A real Prometheus, filled by real parts on loopback, answers every query of every dashboard.

One module-scoped stack: /usr/bin/prometheus with a test copy of prometheus.local.yml (1 s scrape and
rule evaluation, targets rewritten to free loopback ports, the shipped rules), scraping
  - the simulated engine (vllm personality) and a short loadgen run against it,
  - the exporter with fake NVML GPUs, and a replay of the exporter's scrape recorded on a real H200
    (tests/fixtures/exporter/h200-metrics.txt; its Hostname is relabelled "h200-capture" so it can be
    told apart from the fake GPUs of the exporter running on this same host),
  - replays of the real vLLM 0.26.0 and SGLang 0.5.14 /metrics captures (idle -> load -> after).
Then each panel, annotation and variable query is run the way Grafana would run it (variables,
$__rate_interval, $__interval and $__range substituted) and must return data.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from grafana.dashgen.queries import (  # noqa: E402
    Query,
    grafana_intervals,
    interpolate,
    iter_queries,
    split_label_values,
)
from tests.conftest import FIXTURES, GOLDEN_LLAMACPP, GOLDEN_SGLANG, GOLDEN_VLLM  # noqa: E402
from tests.integration.test_stack_support import (  # noqa: E402
    FakeGrafana,
    ReplayServer,
    free_port,
    prom_get,
    start_prometheus,
    wait_for,
    wait_http,
)

H200_CAPTURE = FIXTURES / "exporter" / "h200-metrics.txt"
H200_HOSTNAME = "h200-capture"
# The Baselines board's Prometheus panels read a `baseline schedule` process and its SQL panels the
# results store: tests/integration/test_baseline_dashboard.py runs every query of it against both.
BOARD_FILES = sorted(
    p for p in (REPO / "grafana" / "dashboards").glob("*.json") if p.name != "baselines.json"
)
SCRAPE_S = 1
# the engine reports usage.prompt_tokens_details, so the cache-hit-ratio panels have a series
SIM_FLAGS = (
    "--personality",
    "vllm",
    "--time-scale",
    "20",
    "--max-num-seqs",
    "64",
    "--enable-prompt-tokens-details",
)
GRAFANA_TOKEN = "glsa_stack_test"

pytestmark = [pytest.mark.prometheus, pytest.mark.xdist_group("prometheus"), pytest.mark.timeout(240)]


@dataclass
class Stack:
    """The filled Prometheus and what was put into it."""

    url: str
    run_id: str
    summary: dict[str, Any]
    start: float
    end: float = 0.0
    instances: dict[str, str] = field(default_factory=dict)  # role -> host:port
    h200_hostname: str = H200_HOSTNAME
    grafana_requests: list[tuple[str, str, Any]] = field(default_factory=list)
    grafana_problems: list[str] = field(default_factory=list)


def golden_snapshots(directory: Path) -> list[Path]:
    return [directory / f"metrics_{i}_{name}.txt" for i, name in enumerate(("idle", "load", "after"))]


def llamacpp_snapshots() -> list[Path]:
    """The real llama-server's /metrics, idle then after requests (curl -i: the replay cuts the head)."""
    return [GOLDEN_LLAMACPP / "metrics_0_idle.txt", GOLDEN_LLAMACPP / "metrics_1_after.txt"]


def prometheus_config(ports: dict[str, list[str]], h200_replay: str) -> dict[str, Any]:
    """The shipped local config with test intervals and targets (jobs without one are dropped), plus
    the H200 capture's replay as an exporter whose Hostname label is relabelled."""
    config = yaml.safe_load((REPO / "prometheus" / "prometheus.local.yml").read_text())
    config["global"].update(
        scrape_interval=f"{SCRAPE_S}s", scrape_timeout=f"{SCRAPE_S}s", evaluation_interval=f"{SCRAPE_S}s"
    )
    config["rule_files"] = [str(REPO / "prometheus" / "rules" / "*.yml")]
    jobs = []
    for job in config["scrape_configs"]:
        targets = ports.get(job["job_name"])
        if targets:
            job["static_configs"] = [{"targets": targets}]
            jobs.append(job)
    relabel = {
        "target_label": "Hostname",
        "replacement": H200_HOSTNAME,
        "action": "replace",
        "source_labels": ["Hostname"],
        "regex": ".+",
    }
    jobs.append(
        {
            "job_name": "infergauge-exporter-h200",
            "static_configs": [{"targets": [h200_replay]}],
            "metric_relabel_configs": [relabel],
        }
    )
    config["scrape_configs"] = jobs
    return config


def run_loadgen(base_url: str, metrics_port: int, results_dir: Path, grafana_url: str) -> Any:
    from loadgen.config import RunConfig
    from loadgen.run.runner import run_benchmark_sync

    config = RunConfig(
        target="vllm",
        base_url=base_url,
        profile="short",
        rate=12.0,
        arrival="poisson",
        duration_s=9.0,
        max_concurrency=32,
        seed=7,
        slo={"ttft_s": 1.0, "e2e_s": 10.0},
        metrics_port=metrics_port,
        linger_s=4.0,
        results_dir=str(results_dir),
        scenario="stack-test",
        grafana_url=grafana_url,
        grafana_token=GRAFANA_TOKEN,
    )
    return run_benchmark_sync(config, progress=False)


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    from simengine.embedded import EmbeddedEngine

    with (
        tempfile.TemporaryDirectory(prefix="infergauge-stack-") as tmp,
        ReplayServer(golden_snapshots(GOLDEN_VLLM)) as vllm,
        ReplayServer(golden_snapshots(GOLDEN_SGLANG)) as sglang,
        ReplayServer(llamacpp_snapshots()) as llamacpp,
        EmbeddedEngine([*SIM_FLAGS]) as engine,
        FakeGrafana(GRAFANA_TOKEN) as grafana,
        ReplayServer([H200_CAPTURE]) as h200,
    ):
        tmp_path = Path(tmp)
        exporter_port, loadgen_port, prom_port = free_port(), free_port(), free_port()
        exporter = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "exporter",
                "--host",
                "127.0.0.1",
                "--port",
                str(exporter_port),
                "--engine-url",
                engine.base_url,
                "--no-discover",
                "--fake-gpus",
                "2",
                "--sample-interval",
                "0",
                "--log-level",
                "warning",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        engine_inst = engine.base_url.split("//", 1)[1].rstrip("/")
        instances = {
            "vllm": vllm.instance,
            "sglang": sglang.instance,
            "llamacpp": llamacpp.instance,
            "simengine": engine_inst,
            "exporter": f"127.0.0.1:{exporter_port}",
            "loadgen": f"127.0.0.1:{loadgen_port}",
        }
        instances["h200"] = h200.instance
        config = prometheus_config(
            {
                "loadgen": [instances["loadgen"]],
                "infergauge-exporter": [instances["exporter"]],
                "vllm": [vllm.instance],
                "sglang": [sglang.instance],
                "llamacpp": [llamacpp.instance],
                "simengine": [engine_inst],
                "prometheus": [f"127.0.0.1:{prom_port}"],
            },
            h200.instance,
        )
        (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
        prom = start_prometheus(tmp_path / "prometheus.yml", prom_port, tmp_path / "tsdb")
        try:
            wait_http(f"http://{instances['exporter']}/healthz", 20)
            url = f"http://127.0.0.1:{prom_port}"
            start = time.time()
            result = run_loadgen(engine.base_url, loadgen_port, tmp_path / "results", grafana.url)
            run_sel = f'{{run_id="{result.run_id}"}}'
            # the final scrape (end timestamp set) and the rules evaluated on it; loadgen stopped serving
            # after its linger, so its series are stale by now: look back instead of at "now"
            wait_for(
                lambda: prom_get(
                    url, "query", query=f"max_over_time(loadgen_run_end_timestamp_seconds{run_sel}[1m]) > 0"
                ),
                15,
            )
            wait_for(
                lambda: prom_get(
                    url, "query", query=f"last_over_time(run_id:loadgen_requests_ok:run_rate{run_sel}[1m])"
                ),
                10,
            )
            wait_for(lambda: vllm.served >= 3 and sglang.served >= 3 and llamacpp.served >= 2, 10)
            stack = Stack(url, result.run_id, result.summary, start, time.time() + 1, instances)
            stack.grafana_requests, stack.grafana_problems = grafana.requests, grafana.problems
            yield stack
        finally:
            prom.terminate()
            prom.wait(timeout=10)
            exporter.terminate()
            exporter.wait(timeout=10)


def variable_choices(stack: Stack, board: dict[str, Any]) -> dict[str, str]:
    """The value each template variable gets, like a user picking the test's run and engines."""
    values: dict[str, str] = {}
    for var in board["templating"]["list"]:
        if var["type"] == "textbox":  # the SLO boxes: their defaults
            values[var["name"]] = var["query"]
        elif var["type"] == "datasource":  # the provisioned Prometheus: this test's Prometheus
            values[var["name"]] = var["current"]["value"]
        elif var.get("includeAll"):
            values[var["name"]] = var["allValue"]
    values["run_id"] = stack.run_id
    if board["uid"].startswith("infergauge-engine-"):  # engine panels must work on the REAL engines' names
        values["instance"] = stack.instances[board["uid"].removeprefix("infergauge-engine-")]
    return values


def has_data(result: list[dict[str, Any]]) -> bool:
    """At least one sample that is a number (Grafana draws nothing for NaN)."""
    for series in result:
        samples = series.get("values") or [series.get("value")]
        if any(s and not math.isnan(float(s[1])) for s in samples):
            return True
    return False


def run_query(stack: Stack, query: Query, values: dict[str, str]) -> list[dict[str, Any]]:
    range_s = stack.end - stack.start
    builtins = grafana_intervals(range_s, SCRAPE_S)
    expr = interpolate(query.expr, {**values, **builtins})
    if query.instant:
        return prom_get(stack.url, "query", query=expr, time=f"{stack.end:.3f}")
    step = builtins["__interval"]
    return prom_get(
        stack.url, "query_range", query=expr, start=f"{stack.start:.3f}", end=f"{stack.end:.3f}", step=step
    )


@pytest.mark.parametrize("path", BOARD_FILES, ids=lambda p: p.name)
def test_variable_queries_offer_the_test_run_and_engines(stack: Stack, path: Path) -> None:
    board = json.loads(path.read_text(encoding="utf-8"))
    values = variable_choices(stack, board)
    for query in iter_queries(board):
        if query.kind != "variable":
            continue
        parsed = split_label_values(interpolate(query.expr, values))
        assert parsed, f"{query.title}: not a label_values() query"
        selector, label = parsed
        series = prom_get(
            stack.url,
            "series",
            **{"match[]": selector, "start": f"{stack.start:.3f}", "end": f"{stack.end:.3f}"},
        )
        offered = {s[label] for s in series if label in s}
        assert offered, f"{path.name}: variable {query.title} offers nothing"
        if query.title in values and values[query.title] != ".*":
            assert values[query.title] in offered, f"{query.title}: {values[query.title]} not in {offered}"


@pytest.mark.parametrize("path", BOARD_FILES, ids=lambda p: p.name)
def test_every_panel_query_returns_data(stack: Stack, path: Path) -> None:
    board = json.loads(path.read_text(encoding="utf-8"))
    values = variable_choices(stack, board)
    empty = [
        f"{q.kind} {q.title!r} {q.ref}: {q.expr}"
        for q in iter_queries(board)
        if q.kind != "variable" and not has_data(run_query(stack, q, values))
    ]
    assert empty == []


def test_run_boundaries_come_from_prometheus_alone(stack: Stack) -> None:
    board = json.loads((REPO / "grafana" / "dashboards" / "run-live.json").read_text())
    values = variable_choices(stack, board)
    ann = {q.title: q for q in iter_queries(board) if q.kind == "annotation"}
    for name, iso in (("Run start (Prometheus)", "started_at"), ("Run end (Prometheus)", "ended_at")):
        series = run_query(stack, ann[name], values)
        assert [s["metric"]["run_id"] for s in series] == [stack.run_id]
        marks_ms = {float(v[1]) for v in series[0]["values"]}
        assert len(marks_ms) == 1  # one boundary, at the value's time (useValueForTime)
        from datetime import datetime

        expected = datetime.fromisoformat(stack.summary[iso].replace("Z", "+00:00")).timestamp() * 1000
        assert abs(marks_ms.pop() - expected) < 1000


def test_recorded_run_figures_agree_with_the_exact_summary(stack: Stack) -> None:
    def recorded(series: str) -> float:
        result = prom_get(
            stack.url, "query", query=f'last_over_time({series}{{run_id="{stack.run_id}"}}[5m])'
        )
        assert len(result) == 1, series
        return float(result[0]["value"][1])

    summary = stack.summary
    ok = prom_get(
        stack.url,
        "query",
        query=f'last_over_time(loadgen_requests_total{{run_id="{stack.run_id}",outcome="ok"}}[5m])',
    )
    assert float(ok[0]["value"][1]) == summary["requests"]["ok"]  # no warmup in this run
    assert summary["requests"]["ok"] >= 50
    # histogram estimate vs exact percentile: buckets are ~10% wide (24 per decade), so within 10%;
    # p99 of ~100 requests sits in a sparsely filled bucket and is not compared
    for series, key, quantile in (
        ("run_id:loadgen_time_to_first_token_seconds:p50", "ttft_s", "p50"),
        ("run_id:loadgen_request_duration_seconds:p50", "e2e_s", "p50"),
        ("run_id:loadgen_request_duration_seconds:p90", "e2e_s", "p90"),
    ):
        exact = summary[key][quantile]
        assert recorded(series) == pytest.approx(exact, rel=0.10), (series, exact)


def test_every_rule_evaluates_without_error(stack: Stack) -> None:
    groups = prom_get(stack.url, "rules")["groups"]
    rules = [r for g in groups for r in g["rules"]]
    assert len(rules) >= 40
    broken = {r["name"]: r.get("lastError") for r in rules if r["health"] != "ok"}
    assert broken == {}


def active_alerts(stack: Stack) -> dict[str, list[dict[str, str]]]:
    """alertname -> label sets of every alert that was pending or firing during the test."""
    window = f"{int(time.time() - stack.start) + 5}s"
    result = prom_get(stack.url, "query", query=f"max_over_time(ALERTS[{window}])")
    out: dict[str, list[dict[str, str]]] = {}
    for series in result:
        out.setdefault(series["metric"]["alertname"], []).append(series["metric"])
    return out


def test_alerts_see_what_the_real_h200_scrape_shows(stack: Stack) -> None:
    # The H200 capture was taken under load: sw_power_cap active and a `python3` process holding
    # 22.5 GB; the fake GPUs hold memory for a pid with no process here ("unknown"). While the loadgen
    # run had requests in flight, both alerts must at least have become pending.
    active = active_alerts(stack)
    throttled = {(a["Hostname"], a["reason"]) for a in active.get("GpuClockThrottledDuringRun", [])}
    assert (H200_HOSTNAME, "sw_power_cap") in throttled
    foreign = {a["process"] for a in active.get("ForeignProcessOnBenchmarkGpu", [])}
    assert "python3" in foreign
    # ...and nothing that would be a false alarm on this healthy setup
    quiet = {
        "RunErrorRateHigh",
        "EngineDown",
        "EngineNotServing",
        "EngineNotReady",
        "EngineKvCacheSaturated",
        "EnginePreempting",
        "ExporterCollectorFailing",
        "ExporterDown",
    }
    assert quiet & set(active) == set()


def test_the_run_is_annotated_in_grafana(stack: Stack) -> None:
    # the runner calls loadgen.run.annotations: POST at the start, PATCH with timeEnd at the end
    calls = [(method, path.rsplit("/", 1)[0]) for method, path, _ in stack.grafana_requests]
    assert calls == [("POST", "/api"), ("PATCH", "/api/annotations")]
    start, end = (body for _, _, body in stack.grafana_requests)
    assert f"run_id:{stack.run_id}" in start["tags"]
    assert "infergauge" in start["tags"]
    assert end["timeEnd"] > end["time"]
    assert stack.grafana_problems == []


def test_gpu_panels_answer_from_the_real_h200_scrape(stack: Stack) -> None:
    # Only the H200 capture's series (Hostname="h200-capture"): the GPU panels of the GPU host and
    # live run dashboards must work on what the exporter really emitted on a GPU, not only on fakes.
    one_gpu = prom_get(stack.url, "query", query=f'count(DCGM_FI_DEV_GPU_UTIL{{Hostname="{H200_HOSTNAME}"}})')
    assert one_gpu[0]["value"][1] == "1"
    single_gpu_has_no_peers = {"Interconnect (topology)"}
    empty = []
    for name in ("gpu-host.json", "run-live.json"):
        board = json.loads((REPO / "grafana" / "dashboards" / name).read_text())
        values = {**variable_choices(stack, board), "Hostname": H200_HOSTNAME}
        for query in iter_queries(board):
            if (
                query.kind != "panel"
                or "$Hostname" not in query.expr
                or query.title in single_gpu_has_no_peers
            ):
                continue
            if not has_data(run_query(stack, query, values)):
                empty.append(f"{name} {query.title!r}: {query.expr}")
    assert empty == []


def test_check_command_finds_data_for_every_query(
    stack: Stack, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from grafana.dashgen.check import main as check_main

    minutes = (time.time() - stack.start) / 60 + 0.1
    argv = [
        "--prometheus",
        stack.url,
        "--minutes",
        f"{minutes:.3f}",
        "--scrape",
        str(SCRAPE_S),
        "--var",
        f"run_id={stack.run_id}",
        "--json",
        str(tmp_path / "check.json"),
        *(arg for p in BOARD_FILES for arg in ("--dashboard", json.loads(p.read_text())["uid"])),
    ]
    assert check_main(argv) == 0
    outcomes = json.loads((tmp_path / "check.json").read_text())
    assert len(outcomes) == sum(len(list(iter_queries(json.loads(p.read_text())))) for p in BOARD_FILES)
    assert all(o["series"] > 0 for o in outcomes)
    assert f"{len(outcomes)}/{len(outcomes)} queries returned data" in capsys.readouterr().out
