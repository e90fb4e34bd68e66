"""The seed's opening story as a test: two simulated runs identical except max_num_seqs show the
throughput/P99 gap, and `loadgen diff` names max_num_seqs first; `align --check` agrees."""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from click.testing import CliRunner

from loadgen.cli.align import align
from loadgen.cli.diff import diff
from loadgen.cli.report import report
from loadgen.config import RunConfig
from loadgen.run.runner import run_benchmark_sync
from simengine.embedded import EmbeddedEngine


def _run(results: Path, max_num_seqs: int, seed: int = 42) -> str:
    config = RunConfig(
        target="sim",
        max_concurrency=16,
        num_prompts=32,
        profile="short",
        seed=seed,
        metrics_port=0,
        linger_s=0,
        results_dir=str(results),
        sim_args=("--max-num-seqs", str(max_num_seqs), "--time-scale", "1"),
    )
    return run_benchmark_sync(config, progress=False).run_id


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> tuple[Path, str, str, str]:
    results = tmp_path_factory.mktemp("results")
    return results, _run(results, 16), _run(results, 4), _run(results, 16, seed=8)


def _row(output: str, label: str) -> list[str]:
    line = next(line for line in output.splitlines() if line.startswith(label))
    return re.split(r"\s{2,}", line.strip())


def test_diff_shows_the_gap_and_names_max_num_seqs_first(runs):
    results, a, b, _ = runs
    result = CliRunner().invoke(diff, [a, b, "--results-dir", str(results)])
    assert result.exit_code == 0, result.output
    out = result.stdout
    rps = _row(out, "request throughput")
    assert float(rps[1]) > 2 * float(rps[2])  # 16 in flight vs 4 in flight: the seed's gap
    e2e = _row(out, "E2E p99")
    assert float(e2e[1].split()[0]) < float(e2e[2].split()[0])
    first = next(line for line in out.splitlines() if re.match(r"^1\s", line))
    assert re.split(r"\s{2,}", first.strip())[1:5] == ["params", "engine.params.max_num_seqs", "16", "4"]
    assert "different workloads" not in out
    # one max_num_seqs row, not five: the raw spellings (server args, simulator flags) are that row
    listed = CliRunner().invoke(diff, [a, b, "--results-dir", str(results), "--all"]).stdout
    mentions = [re.split(r"\s{2,}", line.strip()) for line in listed.splitlines() if "max_num_seqs" in line]
    assert [cells[:3] for cells in mentions] == [["1", "params", "engine.params.max_num_seqs"]]


def test_diff_warns_on_different_workloads_and_rejects_unknown_ids(runs):
    results, a, _, other_seed = runs
    warned = CliRunner().invoke(diff, [a, other_seed, "--results-dir", str(results)])
    assert warned.exit_code == 0
    assert "warning: the runs used different workloads" in warned.stdout
    missing = CliRunner().invoke(diff, [a, "20991231T000000Z-000000", "--results-dir", str(results)])
    assert missing.exit_code == 2
    assert "no run '20991231T000000Z-000000'" in missing.output


def test_align_check_on_run_ids(runs):
    results, a, b, _ = runs
    result = CliRunner().invoke(align, ["--check", a, b, "--results-dir", str(results)])
    assert result.exit_code == 1
    assert _row(result.stdout, "max_num_seqs") == ["max_num_seqs", "16", "4"]


def test_align_check_on_live_engines():
    with (
        EmbeddedEngine(["--personality", "sglang", "--max-running-requests", "32"]) as one,
        EmbeddedEngine(["--personality", "sglang", "--max-running-requests", "8"]) as two,
    ):
        result = CliRunner().invoke(align, ["--check", one.base_url, two.base_url])
        same = CliRunner().invoke(align, ["--check", one.base_url, one.base_url])
    assert result.exit_code == 1, result.output
    assert _row(result.stdout, "max_num_seqs") == ["max_num_seqs", "32", "8"]
    assert same.exit_code == 0
    assert "aligned" in same.stdout


class _ManifestHandler(BaseHTTPRequestHandler):
    body = b"{}"

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self.send_response(200 if self.path == "/manifest" else 404)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: object) -> None:
        pass


def test_align_check_prefers_the_exporter_view_of_the_matching_engine():
    with (
        EmbeddedEngine(["--personality", "sglang", "--max-running-requests", "32"]) as one,
        EmbeddedEngine(["--personality", "sglang", "--max-running-requests", "32"]) as two,
    ):
        # the exporter sees two engines on the host; only the one on A's port is A, and the command
        # line the exporter read outranks what the engine says over HTTP
        engines = [
            {"engine": "sglang", "url": two.base_url, "args": {"max_running_requests": 32}},
            {"engine": "sglang", "url": one.base_url, "args": {"max_running_requests": 48}},
        ]
        handler = type("H", (_ManifestHandler,), {"body": json.dumps({"engines": engines}).encode()})
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            exporter = f"http://127.0.0.1:{server.server_address[1]}"
            args = ["--check", one.base_url, two.base_url, "--exporter-a", exporter]
            result = CliRunner().invoke(align, args)
        finally:
            server.shutdown()
    assert result.exit_code == 1, result.output
    assert f"from exporter {exporter}" in result.stdout
    assert _row(result.stdout, "max_num_seqs") == ["max_num_seqs", "48", "32"]


def test_report_on_run_ids_keeps_configurations_apart(runs, tmp_path):
    results, a, b, _ = runs
    result = CliRunner().invoke(report, [a, b, "--results-dir", str(results), "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    text = (tmp_path / "report.md").read_text()
    assert "max_num_seqs=16" in text
    assert "max_num_seqs=4" in text
    assert "**Runs:** 2 in 2 series" in text
