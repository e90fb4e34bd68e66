"""Issue 22 item 20: `loadgen preflight` says `starting` (a warning, exit 0), not `engine_down` (exit 1),
while the engine's process lives but does not answer yet; `loadgen report` names a configuration's
rate series and its concurrency series apart."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from exporter.checks import engine_checks
from loadgen.analysis.series import group_series
from loadgen.cli.preflight import preflight
from loadgen.cli.preflight_view import engine_state
from loadgen.results.rundir import RunRecord
from tests.conftest import GOLDEN
from tests.loadgen_servers import free_port

pytestmark = pytest.mark.timeout(90)
STARTING = GOLDEN / "real-runs-2026-12-01" / "exporter" / "exporter-vllm-starting.manifest.json"


def test_msgs_preflight_real_starting_vllm_is_starting_not_down() -> None:
    engines = json.loads(STARTING.read_text())["engines"]  # vLLM 0.26.0 loading: pid 757, no answer
    checks = engine_checks(engines, ["http://127.0.0.1:8000"])
    ids = {c["id"]: c["severity"] for c in checks}
    assert ids.get("engine_starting") == "warning"
    assert "engine_down" not in ids
    assert engine_state(engines[0]) == "starting"
    assert engine_state({"up": False, "pid": None}) == "down"


def test_msgs_preflight_of_a_live_process_that_does_not_listen_yet(tmp_path: Path) -> None:
    # a process the exporter's discovery reads as `python -m simengine --port P`, still loading
    package = tmp_path / "simengine"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "__main__.py").write_text("import time\ntime.sleep(60)\n")
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "simengine", "--port", str(port)], cwd=tmp_path)
    try:
        time.sleep(0.5)
        result = CliRunner().invoke(preflight, ["--engine-url", f"http://127.0.0.1:{port}", "--json"])
    finally:
        proc.kill()
        proc.wait(timeout=10)
    assert result.exit_code == 0, result.output  # before: 1 (engine_down)
    manifest = json.loads(result.output)
    (engine,) = [e for e in manifest["engines"] if e["url"] == f"http://127.0.0.1:{port}"]
    assert (engine["pid"], engine["up"]) == (proc.pid, False)
    mine = [c for c in manifest["checks"] if f":{port}" in c["message"]]
    assert [c["id"] for c in mine] == ["engine_starting"]


def _record(run_id: str, **summary: object) -> RunRecord:
    manifest = {"engine": {"engine": "vllm", "params": {"max_num_seqs": 64}}}
    return RunRecord(run_id, manifest, {"engine": "vllm", "scenario": "random-short", **summary}, Path("-"))


def test_msgs_report_rate_and_concurrency_series_have_different_names() -> None:
    records = [
        _record("r1", asked_rate=4.0),
        _record("r2", asked_rate=8.0),
        _record("c1", asked_rate="inf", max_concurrency=8),
    ]
    series = group_series(records)
    labels = sorted(s.label for s in series)
    assert labels == [
        "vllm · max_num_seqs=64 · random-short · concurrency",
        "vllm · max_num_seqs=64 · random-short · rate",
    ]
    only_rate = group_series(records[:2])
    assert [s.label for s in only_rate] == ["vllm · max_num_seqs=64 · random-short"]  # no suffix needed
