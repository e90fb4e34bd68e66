"""Change points pushed to Grafana as annotations (grafana-client against a recording aiohttp server on
loopback): the body, once per change, retried after an outage, the token kept out of every output."""

from __future__ import annotations

import logging
from datetime import datetime
from pathlib import Path

import pytest

from loadgen.baseline.annotate import annotate_changes
from loadgen.store.url import StoreURL, parse_store
from tests.changes_support import FIRST_CHECK, STARTED, finding, record, stored_changes
from tests.grafana_recorder import GrafanaRecorder
from tests.store_support import loadgen

TOKEN = "glsa_baseline_secret_token"
SERIES = [("s", "s/a@x")]


@pytest.fixture
def url(tmp_path: Path) -> StoreURL:
    parsed = parse_store(f"sqlite:///{tmp_path / 'store.db'}", tmp_path)
    assert parsed is not None
    # a confirmed regression (annotated) and a suspected one (not yet: the next run may not agree)
    record(parsed, [finding(), finding(metric="e2e_p99", status="suspected")], FIRST_CHECK, SERIES)
    return parsed


def test_a_confirmed_change_is_posted_with_its_time_tags_metric_size_and_cause(url: StoreURL) -> None:
    grafana = GrafanaRecorder(TOKEN)
    with grafana.serve() as server:
        assert annotate_changes(url, server.base_url, TOKEN, log=lambda m: None) == 1
    ((call),) = grafana.calls
    assert (call.method, call.path, call.authorization) == ("POST", "/api/annotations", f"Bearer {TOKEN}")
    body = call.body
    assert body["time"] == int(datetime.fromisoformat(STARTED["run07"]).timestamp() * 1000)
    assert body.get("timeEnd") in (None, body["time"])
    assert body["tags"] == [
        "infergauge",
        "baseline",
        "change-point",
        "suite:s",
        "series:s/a@x",
        "metric:tpot_p99",
        "regression",
        "confirmed",
    ]
    # 0.0115 / 0.010 - 1 = +15.0%
    assert body["text"] == (
        "regression: TPOT p99 +15.0% (0.01 -> 0.0115 s) in s/a@x at run07; "
        "cause: engine.version: 0.26.0 -> 0.27.0"
    )


def test_each_change_is_posted_once(url: StoreURL) -> None:
    grafana = GrafanaRecorder(TOKEN)
    with grafana.serve() as server:
        annotate_changes(url, server.base_url, TOKEN, log=lambda m: None)
        assert annotate_changes(url, server.base_url, TOKEN, log=lambda m: None) == 0
    assert len(grafana.calls) == 1
    tpot = next(r for r in stored_changes(url) if r["metric"] == "tpot_p99")
    assert tpot["annotation_id"] == 101  # the id Grafana answered


def test_a_change_confirmed_later_is_posted_then(url: StoreURL) -> None:
    grafana = GrafanaRecorder(TOKEN)
    with grafana.serve() as server:
        annotate_changes(url, server.base_url, TOKEN, log=lambda m: None)
        record(url, [finding(), finding(metric="e2e_p99")], FIRST_CHECK, SERIES)  # e2e now confirmed
        assert annotate_changes(url, server.base_url, TOKEN, log=lambda m: None) == 1
    assert [b["tags"][5] for b in grafana.annotations()] == ["metric:tpot_p99", "metric:e2e_p99"]


def test_a_grafana_that_failed_gets_the_change_at_the_next_check(
    url: StoreURL, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    down = GrafanaRecorder(TOKEN, fail_with=500)
    with caplog.at_level(logging.WARNING), down.serve() as server:
        assert annotate_changes(url, server.base_url, TOKEN) == 0
    assert len(down.calls) >= 1
    assert "HTTP 500" in caplog.text
    up = GrafanaRecorder(TOKEN)
    with up.serve() as server:
        assert annotate_changes(url, server.base_url, TOKEN) == 1
    out = capsys.readouterr()
    assert TOKEN not in caplog.text + out.out + out.err


def test_a_wrong_token_is_a_warning_without_the_token(
    url: StoreURL, caplog: pytest.LogCaptureFixture
) -> None:
    grafana = GrafanaRecorder(TOKEN)
    with caplog.at_level(logging.WARNING), grafana.serve() as server:
        assert annotate_changes(url, server.base_url, "glsa_wrong_token", log=lambda m: None) == 0
    assert "HTTP 401" in caplog.text
    assert "glsa_wrong_token" not in caplog.text
    assert stored_changes(url)[1]["annotation_id"] is None


def test_without_a_grafana_url_nothing_is_posted(url: StoreURL) -> None:
    assert annotate_changes(url, None, TOKEN) == 0
    assert all(r["annotation_id"] is None for r in stored_changes(url))


def test_baseline_check_posts_with_the_token_from_the_environment(
    url: StoreURL, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GRAFANA_TOKEN", TOKEN)
    grafana = GrafanaRecorder(TOKEN)
    with grafana.serve() as server:
        result = loadgen("baseline", "check", "--store", url.public, "--grafana-url", server.base_url)
    assert result.exit_code == 0, result.output  # no runs in this store: nothing gates
    assert [b["tags"][5] for b in grafana.annotations()] == ["metric:tpot_p99"]
    assert "1 change point(s) annotated" in result.stderr
    assert TOKEN not in result.output + result.stderr
