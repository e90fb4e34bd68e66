"""Ctrl-C (SIGINT) during `loadgen experiment run` keeps every finished run; `resume` completes it."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

PLAN = """\
name: interrupt-me
results_dir: {results}
defaults: {{num_prompts: 16, seed: 3, metrics_port: 0, profile: short}}
engines:
  sim:
    kind: launch
    command: python -m simengine --personality vllm --port {{port}} --time-scale 4
    params: {{max_num_seqs: 1}}
    health_timeout_s: 30
phases:
  - {{name: p, kind: baseline, workloads: [short], concurrency: [1, 2, 3]}}
"""


def _loadgen(*args: str) -> list[str]:
    return [sys.executable, "-m", "loadgen.cli.main", *args]


def _done(state_file: Path) -> list[str]:
    try:
        runs = json.loads(state_file.read_text())["runs"]
    except (OSError, ValueError, KeyError):
        return []
    return [v["run_id"] for v in runs.values() if v.get("status") == "done"]


def test_sigint_keeps_finished_runs_and_resume_finishes(tmp_path: Path):
    plan = tmp_path / "plan.yaml"
    plan.write_text(PLAN.format(results=tmp_path))
    state_file = tmp_path / "experiments" / "exp-int" / "state.json"
    proc = subprocess.Popen(
        _loadgen("experiment", "run", str(plan), "--experiment-id", "exp-int"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not _done(state_file) and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert _done(state_file), "no run finished within 60 s"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "loadgen experiment resume exp-int" in err
    state = json.loads(state_file.read_text())
    assert state["status"] == "interrupted"
    kept = _done(state_file)
    assert 1 <= len(kept) < 3
    resumed = subprocess.run(
        _loadgen("experiment", "resume", "exp-int", "--results-dir", str(tmp_path)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert resumed.returncode == 0, resumed.stderr
    final = _done(state_file)
    assert len(final) == 3
    assert final[: len(kept)] == kept  # finished runs kept, not repeated
    assert json.loads(state_file.read_text())["status"] == "done"
