"""Grafana annotations and `loadgen grafana push` against a loopback server checking Grafana's HTTP API."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from loadgen.cli.grafana import grafana
from loadgen.run.annotations import annotate_run_end, annotate_run_start
from tests.integration.test_stack_support import FakeGrafana, free_port

REPO = Path(__file__).resolve().parents[2]
TOKEN = "glsa_test_token"
TAGS = ["loadgen", "run_id:20261129T193000Z-ab12", "target:vllm", "scenario:random-short"]


@pytest.fixture
def fake_grafana() -> Iterator[FakeGrafana]:
    with FakeGrafana(TOKEN) as server:
        yield server


def test_run_start_posts_an_annotation_with_time_tags_and_text(fake_grafana: FakeGrafana) -> None:
    before = int(time.time() * 1000)
    ann_id = annotate_run_start(fake_grafana.url, TOKEN, run_id="r1", tags=TAGS, text="loadgen run r1 (vllm)")
    assert ann_id == 1
    ((method, path, body),) = fake_grafana.requests
    assert (method, path) == ("POST", "/api/annotations")
    assert before <= body["time"] <= int(time.time() * 1000)
    assert body.get("timeEnd") is None
    assert body["tags"] == ["infergauge", *TAGS]
    assert body["text"] == "loadgen run r1 (vllm)"
    assert fake_grafana.problems == []


def _end_request(grafana: FakeGrafana, annotation_id: int | None) -> tuple[str, str, dict[str, Any]]:
    """annotate_run_end for run r1 over one minute; the one request it made."""
    annotate_run_end(
        grafana.url,
        TOKEN,
        annotation_id,
        run_id="r1",
        tags=TAGS,
        text="loadgen run r1 ended",
        start_ms=1_795_000_000_000,
        end_ms=1_795_000_060_000,
    )
    ((method, path, body),) = grafana.requests
    return method, path, body


def test_run_end_turns_the_annotation_into_a_region(fake_grafana: FakeGrafana) -> None:
    method, path, body = _end_request(fake_grafana, 7)
    assert (method, path) == ("PATCH", "/api/annotations/7")
    assert (body["time"], body["timeEnd"]) == (1_795_000_000_000, 1_795_000_060_000)
    assert "run_id:20261129T193000Z-ab12" in body["tags"]
    assert fake_grafana.problems == []


def test_run_end_without_a_start_posts_the_whole_region(fake_grafana: FakeGrafana) -> None:
    method, path, body = _end_request(fake_grafana, None)
    assert (method, path) == ("POST", "/api/annotations")
    assert (body["time"], body["timeEnd"]) == (1_795_000_000_000, 1_795_000_060_000)
    assert fake_grafana.problems == []


def test_not_configured_does_nothing(fake_grafana: FakeGrafana) -> None:
    assert annotate_run_start(None, TOKEN, run_id="r1", tags=TAGS, text="x") is None
    annotate_run_end("", TOKEN, None, run_id="r1", tags=TAGS, text="x", start_ms=1, end_ms=2)
    assert fake_grafana.requests == []


@pytest.mark.parametrize("status", [401, 500])
def test_grafana_errors_are_a_warning_never_a_failure(status: int, caplog: pytest.LogCaptureFixture) -> None:
    with FakeGrafana(TOKEN, fail_with=status) as server, caplog.at_level(logging.WARNING):
        assert annotate_run_start(server.url, TOKEN, run_id="r1", tags=TAGS, text="x") is None
        annotate_run_end(server.url, TOKEN, 3, run_id="r1", tags=TAGS, text="x", start_ms=1, end_ms=2)
    warnings = [r.getMessage() for r in caplog.records if r.name == "loadgen.run.annotations"]
    assert len(warnings) == 2
    assert all(f"HTTP {status}" in w and "the run goes on" in w for w in warnings)
    assert TOKEN not in caplog.text


def test_unreachable_grafana_is_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    url = f"http://admin:s3cret@127.0.0.1:{free_port()}"
    with caplog.at_level(logging.WARNING):
        assert annotate_run_start(url, TOKEN, run_id="r1", tags=TAGS, text="x") is None
    assert "run r1 start" in caplog.text
    assert "s3cret" not in caplog.text
    assert TOKEN not in caplog.text


def test_push_uploads_every_dashboard_into_a_folder(fake_grafana: FakeGrafana) -> None:
    result = CliRunner().invoke(grafana, ["push", "--url", fake_grafana.url, "--token", TOKEN])
    assert result.exit_code == 0, result.output
    boards = [b for m, p, b in fake_grafana.requests if (m, p) == ("POST", "/api/dashboards/db")]
    files = sorted((REPO / "grafana" / "dashboards").glob("*.json"))
    assert [b["dashboard"]["uid"] for b in boards] == [json.loads(f.read_text())["uid"] for f in files]
    assert all(
        b["overwrite"] and b["folderUid"] == "infergauge" and b["dashboard"]["id"] is None for b in boards
    )
    assert ("POST", "/api/folders") in [(m, p) for m, p, _ in fake_grafana.requests]
    assert fake_grafana.folders == {"infergauge"}
    assert "infergauge-run-live: success /d/infergauge-run-live/x" in result.output
    assert TOKEN not in result.output


def test_push_retargets_the_datasource_uid(fake_grafana: FakeGrafana) -> None:
    result = CliRunner().invoke(
        grafana, ["push", "--url", fake_grafana.url, "--token", TOKEN, "--datasource-uid", "my-prom"]
    )
    assert result.exit_code == 0, result.output
    for _m, path, body in fake_grafana.requests:
        if path == "/api/dashboards/db":
            text = json.dumps(body)
            assert "infergauge-prometheus" not in text
            pickers = {
                v["query"]: v for v in body["dashboard"]["templating"]["list"] if v["type"] == "datasource"
            }
            assert pickers["prometheus"]["current"]["value"] == "my-prom"
            if "grafana-postgresql-datasource" in pickers:  # the Baselines board's results store: kept
                assert pickers["grafana-postgresql-datasource"]["current"]["value"] == "infergauge-postgres"


def test_push_reads_url_and_token_from_the_environment(fake_grafana: FakeGrafana) -> None:
    env = {"GRAFANA_URL": fake_grafana.url, "GRAFANA_TOKEN": TOKEN}
    result = CliRunner().invoke(grafana, ["push"], env=env)
    assert result.exit_code == 0, result.output


def test_push_bad_input_is_a_one_line_usage_error(tmp_path: Path) -> None:
    bad_url = CliRunner().invoke(grafana, ["push", "--url", "grafana.local:3000"])
    assert bad_url.exit_code == 2
    assert "'grafana.local:3000'" in bad_url.output
    empty = CliRunner().invoke(grafana, ["push", "--url", "http://127.0.0.1:3000", "--dir", str(tmp_path)])
    assert empty.exit_code == 2
    assert "no *.json dashboards" in empty.output


def test_push_reports_an_unreachable_or_refusing_grafana() -> None:
    down = CliRunner().invoke(grafana, ["push", "--url", f"http://127.0.0.1:{free_port()}", "--token", TOKEN])
    assert down.exit_code == 1
    assert "grafana push to 127.0.0.1 failed" in down.output
    with FakeGrafana(TOKEN) as server:
        refused = CliRunner().invoke(grafana, ["push", "--url", server.url, "--token", "wrong"])
    assert refused.exit_code == 1
    assert "HTTP 401" in refused.output
    assert "wrong" not in refused.output
