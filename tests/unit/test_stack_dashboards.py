"""Grafana provisioning files and dashboard JSON: what Grafana's file provisioning accepts, read well."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # grafana/dashgen lives beside the packages, not inside one
    sys.path.insert(0, str(REPO))

from grafana.dashgen import BUILDERS, DASHBOARD_DIR, render  # noqa: E402
from grafana.dashgen.queries import interpolate, iter_queries, variable_names  # noqa: E402

PROVISIONING = REPO / "grafana" / "provisioning"
BOARD_FILES = sorted(DASHBOARD_DIR.glob("*.json"))
TITLES = {"Benchmark run (live)", "Run comparison", "GPU host", "Baselines"} | {
    f"Engine: {name}"
    for name in ("vLLM", "SGLang", "llama.cpp")  # one per registered engine
}
PROMETHEUS_DS = {"type": "prometheus", "uid": "${datasource}"}
STORE_DS = {"type": "grafana-postgresql-datasource", "uid": "${store}"}
BUILTIN_VARS = {"__interval", "__interval_ms", "__rate_interval", "__range", "__range_s", "__range_ms"}


def boards() -> dict[str, dict[str, Any]]:
    return {p.name: json.loads(p.read_text(encoding="utf-8")) for p in BOARD_FILES}


def all_panels(panels: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for panel in panels:
        out.append(panel)
        out.extend(all_panels(panel.get("panels", [])))
    return out


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_committed_json_is_what_the_generator_writes(name: str) -> None:
    # after editing grafana/dashgen, run `python -m grafana.dashgen` and commit the JSON
    assert (DASHBOARD_DIR / name).read_text(encoding="utf-8") == render(BUILDERS[name])


def test_the_dashboards_exist_with_stable_unique_uids() -> None:
    loaded = boards()
    assert {b["title"] for b in loaded.values()} == TITLES
    uids = [b["uid"] for b in loaded.values()]
    assert len(set(uids)) == len(uids)
    assert all(uid.startswith("infergauge-") and len(uid) <= 40 for uid in uids)


def test_datasource_provisioning() -> None:
    config = yaml.safe_load((PROVISIONING / "datasources" / "prometheus.yml").read_text())
    assert config["apiVersion"] == 1
    (ds,) = config["datasources"]
    assert ds["type"] == "prometheus"
    assert ds["uid"] == "infergauge-prometheus"
    assert ds["access"] == "proxy"
    scrape = yaml.safe_load((REPO / "prometheus" / "prometheus.yml").read_text())["global"]["scrape_interval"]
    assert ds["jsonData"]["timeInterval"] == scrape  # $__rate_interval depends on it


def test_dashboard_provider_points_at_the_mounted_dashboards() -> None:
    config = yaml.safe_load((PROVISIONING / "dashboards" / "infergauge.yml").read_text())
    assert config["apiVersion"] == 1
    (provider,) = config["providers"]
    assert provider["type"] == "file"
    assert provider["options"]["path"] == "/var/lib/grafana/dashboards"
    compose = (REPO / "docker-compose.yml").read_text()
    assert "./grafana/dashboards:/var/lib/grafana/dashboards:ro" in compose


@pytest.mark.parametrize("path", BOARD_FILES, ids=lambda p: p.name)
def test_dashboard_is_provisionable(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    board = json.loads(text)
    assert "__inputs" not in board
    assert "${DS_" not in text
    assert board.get("id") is None
    assert isinstance(board["schemaVersion"], int)
    assert board["schemaVersion"] >= 36
    panels = all_panels(board["panels"])
    assert len({p["id"] for p in panels}) == len(panels)
    for panel in panels:
        pos = panel["gridPos"]
        assert pos["x"] >= 0, panel["title"]
        assert pos["x"] + pos["w"] <= 24, panel["title"]
        for tgt in panel.get("targets", []):
            assert tgt["datasource"] in (PROMETHEUS_DS, STORE_DS), panel["title"]
            if tgt["datasource"] == STORE_DS:  # raw SQL, in the format its panel draws
                assert tgt["rawSql"].strip(), panel["title"]
                assert (tgt["rawQuery"], tgt["format"]) == (
                    True,
                    "table" if panel["type"] == "table" else "time_series",
                )
                assert panel["datasource"] == STORE_DS, panel["title"]
            else:
                assert tgt["expr"].strip(), panel["title"]


@pytest.mark.parametrize("path", BOARD_FILES, ids=lambda p: p.name)
def test_panels_read_well(path: Path) -> None:
    board = json.loads(path.read_text(encoding="utf-8"))
    for panel in all_panels(board["panels"]):
        if panel["type"] in ("timeseries", "stat", "barchart"):
            assert panel["fieldConfig"]["defaults"]["unit"], f"{panel['title']} has no unit"
        if panel["type"] == "timeseries":
            for tgt in panel["targets"]:
                if tgt["datasource"] == STORE_DS:  # SQL: the lines are named by a `metric` column
                    assert " AS metric" in tgt["rawSql"], f"{panel['title']} {tgt['refId']} unnamed"
                else:
                    assert tgt["legendFormat"] not in ("", "__auto"), (
                        f"{panel['title']} {tgt['refId']} unnamed"
                    )


@pytest.mark.parametrize("path", BOARD_FILES, ids=lambda p: p.name)
def test_every_variable_used_is_defined(path: Path) -> None:
    board = json.loads(path.read_text(encoding="utf-8"))
    defined = {v["name"] for v in board["templating"]["list"]}
    for query in iter_queries(board):
        missing = variable_names(query.expr) - defined - BUILTIN_VARS
        assert not missing, f"{query.title}: {missing}"
    values = dict.fromkeys(defined | BUILTIN_VARS, "x")
    for query in iter_queries(board):
        assert "$" not in interpolate(query.expr, values)


def test_run_dashboards_show_slo_lines_and_run_boundaries() -> None:
    live = boards()["run-live.json"]
    ttft = next(p for p in live["panels"] if p["title"] == "TTFT quantiles")
    assert any(t["expr"] == "vector($ttft_slo)" and t["legendFormat"] == "SLO" for t in ttft["targets"])
    names = {a["name"] for a in live["annotations"]["list"]}
    assert {"Run start (Prometheus)", "Run end (Prometheus)", "loadgen annotations (Grafana API)"} <= names
    start = next(a for a in live["annotations"]["list"] if a["name"] == "Run start (Prometheus)")
    assert "loadgen_run_start_timestamp_seconds" in start["expr"]
    assert start["useValueForTime"] is True


def test_comparison_table_has_one_row_per_run() -> None:
    table = next(p for p in boards()["run-comparison.json"]["panels"] if p["type"] == "table")
    assert all(t["instant"] and t["format"] == "table" for t in table["targets"])
    assert all("by (run_id" in t["expr"] for t in table["targets"])
    assert table["transformations"][0]["id"] == "merge"
    columns = set(table["transformations"][1]["options"]["renameByName"].values())
    assert {
        "p50 TTFT",
        "p99 TTFT",
        "p99 TPOT",
        "p99 E2E",
        "req/s (ok)",
        "goodput req/s",
        "failed requests",
    } <= columns


def provisioned_uid() -> str:
    config = yaml.safe_load((PROVISIONING / "datasources" / "prometheus.yml").read_text())
    return str(config["datasources"][0]["uid"])


def datasource_refs(node: Any) -> list[dict[str, Any]]:
    """Every Prometheus datasource reference in a dashboard (panels, targets, variables, annotations)."""
    if isinstance(node, dict):
        here = [node] if node.get("type") == "prometheus" and "uid" in node else []
        return here + [ref for value in node.values() for ref in datasource_refs(value)]
    if isinstance(node, list):
        return [ref for value in node for ref in datasource_refs(value)]
    return []


@pytest.mark.parametrize("path", BOARD_FILES, ids=lambda p: p.name)
def test_the_datasource_is_a_variable_defaulting_to_the_provisioned_one(path: Path) -> None:
    board = json.loads(path.read_text(encoding="utf-8"))
    first = board["templating"]["list"][0]  # before the query variables that use it
    assert (first["name"], first["type"], first["query"]) == ("datasource", "datasource", "prometheus")
    assert first["current"]["value"] == provisioned_uid()
    refs = datasource_refs(board)
    assert refs
    assert {ref["uid"] for ref in refs} == {"${datasource}"}
    assert provisioned_uid() not in json.dumps(refs)


@pytest.mark.parametrize("name", ["run-live.json", "run-comparison.json"])
def test_run_dashboards_take_slo_thresholds_from_variables(name: str) -> None:
    board = boards()[name]
    slo_vars = {v["name"]: v for v in board["templating"]["list"] if v["name"].endswith("_slo")}
    assert set(slo_vars) == {"ttft_slo", "tpot_slo", "e2e_slo"}
    assert all(v["type"] == "textbox" and float(v["query"]) > 0 for v in slo_vars.values())
    used = {name for q in iter_queries(board) for name in variable_names(q.expr)}
    assert set(slo_vars) <= used


def test_comparison_judges_runs_by_the_slo_variables() -> None:
    table = next(p for p in boards()["run-comparison.json"]["panels"] if p["type"] == "table")
    slo = [t["expr"] for t in table["targets"] if "$ttft_slo" in t["expr"]]
    assert len(slo) == 1
    assert all(f"<= bool ${v}" in slo[0] for v in ("ttft_slo", "tpot_slo", "e2e_slo"))
    assert "p99 within SLOs" in table["transformations"][1]["options"]["renameByName"].values()
    fixed = [  # the old fixed 0.5 s threshold colouring of p99 TTFT
        o for o in table["fieldConfig"]["overrides"] if any(p["id"] == "thresholds" for p in o["properties"])
    ]
    assert fixed == []


def store_uid() -> str:
    config = yaml.safe_load((PROVISIONING / "datasources" / "postgres.yml").read_text())
    return str(config["datasources"][0]["uid"])


def sql_refs(node: Any) -> list[dict[str, Any]]:
    """Every PostgreSQL datasource reference in a dashboard."""
    if isinstance(node, dict):
        here = [node] if node.get("type") == STORE_DS["type"] and "uid" in node else []
        return here + [ref for value in node.values() for ref in sql_refs(value)]
    if isinstance(node, list):
        return [ref for value in node for ref in sql_refs(value)]
    return []


def test_baselines_reads_the_store_through_a_datasource_variable() -> None:
    board = boards()["baselines.json"]
    variables = {v["name"]: v for v in board["templating"]["list"]}
    store = variables["store"]
    assert (store["type"], store["query"], store["current"]["value"]) == (
        "datasource",
        STORE_DS["type"],
        store_uid(),
    )
    assert {ref["uid"] for ref in sql_refs(board)} == {"${store}"}
    for name in ("suite", "series"):  # SQL, multi-value with All (Grafana sends every value, quoted)
        assert variables[name]["datasource"] == STORE_DS
        assert (variables[name]["multi"], variables[name]["includeAll"], variables[name]["allValue"]) == (
            True,
            True,
            None,
        )
    assert "FROM runs" in variables["series"]["query"]
    assert "IN ($suite)" in variables["series"]["query"]


def test_baselines_charts_every_watched_metric_from_the_runs_table() -> None:
    from loadgen.baseline.metrics import WATCHED

    board = boards()["baselines.json"]
    history = {p["title"]: p for p in all_panels(board["panels"]) if p["type"] == "timeseries"}
    assert set(history) == {w.label for w in WATCHED.values()} | {CACHE_PANEL}
    (cache,) = history.pop(CACHE_PANEL)["targets"]
    for source in ("'reported'->>'hit_ratio'", "'cache'->>'hit_ratio'", "'implied'->>'hit_ratio'"):
        assert source in cache["rawSql"]  # all three figures of each stored run's summary
    assert "suite IN ($suite) AND series_key IN ($series)" in cache["rawSql"]
    for watched in WATCHED.values():
        (tgt,) = history[watched.label]["targets"]
        sql = tgt["rawSql"]
        assert "$__time(started_at)" in sql, watched.name
        assert "$__timeFilter(started_at)" in sql, watched.name
        assert f"{watched.column} AS" in sql
        assert "FROM runs" in sql
        assert "status = 'ok'" in sql
        assert "suite IN ($suite) AND series_key IN ($series)" in sql


CACHE_PANEL = "Prefix-cache hit ratio per run"


def test_live_and_comparison_boards_chart_the_reported_cache_hit_ratio() -> None:
    live = {p["title"]: p for p in all_panels(boards()["run-live.json"]["panels"])}
    (tgt,) = live["Prefix-cache hit ratio (engine-reported, run so far)"]["targets"]
    assert tgt["expr"].startswith('sum(loadgen_cached_prompt_tokens_total{run_id="$run_id"}) / ')
    compare = {p["title"]: p for p in all_panels(boards()["run-comparison.json"]["panels"])}
    (bar,) = compare["Prefix-cache hit ratio by run"]["targets"]
    assert "loadgen_cached_prompt_tokens_total" in bar["expr"]
    assert "last_over_time" in bar["expr"]


def test_baselines_shows_change_points_open_regressions_and_the_scheduler() -> None:
    board = boards()["baselines.json"]
    annotations = [a for a in board["annotations"]["list"] if a.get("datasource") == STORE_DS]
    assert len(annotations) == 1
    for ann in annotations:
        sql = ann["target"]["rawSql"]
        assert "FROM changes" in sql
        assert "$__timeFilter(first_after_at)" in sql
        assert all(f"AS {col}" in sql for col in ('"time"', "text", "tags"))
    panels = {p["title"]: p for p in all_panels(board["panels"])}
    regressions = panels["Open regressions and their named cause"]
    sql = regressions["targets"][0]["rawSql"]
    assert regressions["type"] == "table"
    assert "FROM changes" in sql
    assert "WHERE open AND kind = 'regression'" in sql
    assert "cause AS" in sql
    prom = " ".join(q.expr for q in iter_queries(board))
    for name in (
        "loadgen_baseline_last_pass_timestamp_seconds",
        "loadgen_baseline_last_pass_success",
        "loadgen_baseline_next_pass_timestamp_seconds",
        "loadgen_baseline_passes_total",
        "loadgen_baseline_regressions_open",
    ):
        assert name in prom
    assert all('suite=~"$suite"' in q.expr for q in iter_queries(board))
