"""Issue 11 item 23: engine-aware start timeouts, a health-wait message naming the slow phase, and
a stop that asks the launcher first and its process group only after a grace period."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from infergauge import engines
from loadgen.experiments import launch
from loadgen.experiments.launch import EngineFailed, LaunchedEngine
from loadgen.experiments.plan import parse_plan
from loadgen.experiments.plantypes import EngineSpec
from loadgen.experiments.startup import Probe, slow_phase

pytestmark = pytest.mark.timeout(90)
PY = sys.executable


def _engines(tmp_path: Path, engines_yaml: str) -> dict[str, EngineSpec]:
    text = (
        f"name: t\nresults_dir: {tmp_path}\nengines:\n{engines_yaml}"
        "phases:\n  - {name: p, kind: baseline, workloads: [short], concurrency: [1]}\n"
    )
    return parse_plan(text, "plan.yaml").engines


def test_start_timeouts_default_per_engine_and_the_plan_overrides(tmp_path: Path) -> None:
    specs = _engines(
        tmp_path,
        "  v:\n    kind: launch\n    command: vllm serve m --port {port}\n"
        "  s:\n    kind: launch\n    command: python -m sglang.launch_server --model-path m --port {port}\n"
        "  sim:\n    kind: launch\n    command: python -m simengine --port {port}\n"
        "  slow:\n    kind: launch\n    command: python -m simengine --port {port}\n"
        "    health_timeout_s: 77\n",
    )
    for name, engine in (("v", "vllm"), ("s", "sglang"), ("sim", "simengine")):
        assert specs[name].health_timeout_s == engines.get(engine).startup_timeout_s
        assert specs[name].health_path == engines.get(engine).readiness_path
    assert specs["v"].health_timeout_s < specs["s"].health_timeout_s  # SGLang starts slower
    assert specs["sim"].health_timeout_s < specs["v"].health_timeout_s
    assert specs["slow"].health_timeout_s == 77


@pytest.mark.parametrize(
    ("probe", "words"),
    [
        (Probe(False, None, None), "port is not listening"),
        (Probe(True, 503, None), "/health not 200 (status 503)"),
        (Probe(True, None, None), "/health not 200 (no HTTP answer)"),
        (Probe(True, 200, 0), "/health answers 200 but /v1/models lists no model"),
    ],
)
def test_each_slow_phase_is_named(probe: Probe, words: str) -> None:
    phase = slow_phase(probe, "/health")
    assert phase is not None
    assert words in phase
    assert slow_phase(Probe(True, 200, 1), "/health") is None


def _launch(tmp_path: Path, command: list[str], timeout_s: float = 1.5) -> LaunchedEngine:
    spec = EngineSpec("e", "launch", "openai", None, tuple(command), health_timeout_s=timeout_s)
    return LaunchedEngine(spec, {}, tmp_path / "engine.log")


@pytest.mark.parametrize(
    ("command", "health_file", "words"),
    [
        ([PY, "-c", "import time; time.sleep(30)"], False, "process alive but its port is not listening"),
        ([PY, "-m", "http.server", "--bind", "127.0.0.1", "{port}"], False, "not 200 (status 404)"),
        ([PY, "-m", "http.server", "--bind", "127.0.0.1", "{port}"], True, "/v1/models lists no model"),
    ],
)
def test_the_timeout_message_says_which_phase_is_slow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str], health_file: bool, words: str
) -> None:
    monkeypatch.chdir(tmp_path)  # http.server serves this folder: a file `health` answers 200
    if health_file:
        (tmp_path / "health").write_text("ok")
    engine = _launch(tmp_path, command)
    with pytest.raises(EngineFailed, match="after 1.5 s") as failed:
        engine.start()
    assert words in str(failed.value)


LAUNCHER = """
import signal, subprocess, sys, time
out = sys.argv[1]
def note(text):
    with open(out, "a") as fh:
        fh.write(text + "\\n")
child = subprocess.Popen([sys.executable, "-c", CHILD, out])
def on_term(*_):
    note("launcher TERM")
    time.sleep(0.3)  # shutting down, as SGLang's launcher does; leaves its child to the group signal
    note("launcher exit")
    sys.exit(0)
signal.signal(signal.SIGTERM, on_term)
note("ready")
time.sleep(60)
"""
CHILD = """
import signal, sys, time
def on_term(*_):
    with open(sys.argv[1], "a") as fh:
        fh.write("child TERM\\n")
    sys.exit(0)
signal.signal(signal.SIGTERM, on_term)
time.sleep(60)
"""


def test_stop_signals_the_launcher_first_then_its_group(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(launch, "STOP_GRACE_S", 2.0)
    monkeypatch.setattr(launch, "GROUP_GRACE_S", 2.0)
    notes = tmp_path / "notes.txt"
    script = f"CHILD = {CHILD!r}\n{LAUNCHER}"
    engine = _launch(tmp_path, [PY, "-c", script, str(notes)])
    engine.argv = [PY, "-c", script, str(notes)]
    engine.proc = launch.subprocess.Popen(engine.argv, start_new_session=True)
    deadline = time.monotonic() + 10
    while "ready" not in (notes.read_text() if notes.exists() else "") and time.monotonic() < deadline:
        time.sleep(0.05)
    pgid = engine.proc.pid
    engine.stop()
    assert notes.read_text().splitlines() == ["ready", "launcher TERM", "launcher exit", "child TERM"]
    assert not launch._group_alive(pgid)


def test_a_launched_sim_stops_on_the_first_sigterm(tmp_path: Path) -> None:
    spec = EngineSpec(
        "sim", "launch", "sim", None, ("python", "-m", "simengine", "--port", "{port}"), "simengine"
    )
    engine = LaunchedEngine(spec, {}, tmp_path / "engine.log")
    engine.start()
    proc = engine.proc
    assert proc is not None
    began = time.monotonic()
    engine.stop()
    assert time.monotonic() - began < launch.STOP_GRACE_S  # it needed no group signal
    assert proc.returncode in (0, -15)
    assert not launch._group_alive(proc.pid)
