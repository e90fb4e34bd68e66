"""loadgen.run.client_cpu and `client_cpu` in a run's summary: what the load cost loadgen itself, checked
against the process's own CPU as the kernel counts it (wait4) for a whole run."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from loadgen.results.merge import merged_client_cpu as merged
from loadgen.run.client_cpu import ClientCpu, not_ours
from loadgen.run.progress import cpu_rows, summary_table

REPO = Path(__file__).resolve().parents[2]


def _spin(seconds: float) -> None:
    until = time.process_time() + seconds
    while time.process_time() < until:
        pass


def test_nothing_is_reported_for_a_run_whose_load_never_started() -> None:
    cpu = ClientCpu()
    cpu.stop()  # a stop before any start changes nothing
    assert cpu.report(10) is None


def test_the_load_is_the_cpu_between_start_and_stop_whatever_comes_after() -> None:
    cpu = ClientCpu()
    _spin(0.02)  # before the load: in total_s, not in load_s
    cpu.start()
    _spin(0.05)
    cpu.stop()
    cpu.start()  # a second start or stop keeps the first
    _spin(0.03)
    cpu.stop()
    got = cpu.report(100)
    assert got is not None
    assert 0.045 <= got["load_s"] < 0.075  # the 50 ms spun between start and stop (a busy host adds)
    assert got["load_ms_per_request"] == pytest.approx(got["load_s"] * 1e3 / 100, rel=1e-4)
    assert 0 < got["load_cores"] <= 1.5  # one thread spinning keeps about one core busy
    assert got["total_s"] >= got["load_s"] + 0.045  # the spins before and after
    assert got["requests"] == 100
    assert cpu.report(0)["load_ms_per_request"] is None  # type: ignore[index]


def test_cpu_an_in_process_engine_spent_is_left_out_and_given_beside() -> None:
    theirs = [0]
    cpu = ClientCpu()
    with not_ours(lambda: theirs[0]):
        cpu.start()
        _spin(0.06)
        theirs[0] = 40_000_000  # of the 60 ms spun, 40 were the engine's thread's
        cpu.stop()
        got = cpu.report(10)
    assert got is not None
    assert got["embedded_engine_s"] == 0.04
    assert 0.015 <= got["load_s"] < 0.045  # ~20 ms ours (a busy host adds)
    plain = ClientCpu()
    plain.start()
    plain.stop()
    assert "embedded_engine_s" not in (plain.report(1) or {})  # no engine in this process


def test_merged_shards_sum_and_an_empty_set_is_none() -> None:
    assert merged({}) is None
    one = {"load_s": 2.0, "load_ms_per_request": 1.0, "load_cores": None, "total_s": 2.5, "requests": 2000}
    got = merged({"0": one})
    assert got is not None
    assert (got["load_s"], got["load_cores"], got["requests"]) == (2.0, None, 2000)


def test_the_console_summary_shows_the_client_cost_only_when_there_is_one() -> None:
    rows = cpu_rows({"load_s": 1.5, "load_ms_per_request": 0.375, "load_cores": 0.19, "total_s": 1.8})
    assert "Client Cost" in rows[0]
    assert rows[1].split() == ["CPU", "over", "the", "load", "(s):", "1.50"]
    assert rows[2].split()[-1] == "0.375"
    assert rows[3].split()[-1] == "0.19"
    assert cpu_rows({}) == []
    with_engine = cpu_rows(
        {"load_s": 1.0, "load_ms_per_request": 0.5, "load_cores": 0.1, "embedded_engine_s": 2.5}
    )
    assert with_engine[-1].split()[-1] == "2.50"
    assert "left out" in with_engine[-1]


def _run(args: list[str]) -> tuple[dict[str, Any], float]:
    """(summary printed by `--json`, CPU s the kernel counted for the whole process) of a loadgen run."""
    code = "import sys; from loadgen.cli.main import main; sys.argv = ['loadgen', *sys.argv[1:]]; main()"
    child = subprocess.Popen(
        [sys.executable, "-c", code, *args], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    _, status, usage = os.wait4(child.pid, 0)
    out = child.stdout.read() if child.stdout else b""
    assert os.waitstatus_to_exitcode(status) == 0, child.stderr.read() if child.stderr else ""
    return json.loads(out), usage.ru_utime + usage.ru_stime  # the whole process, its exit included


@pytest.mark.timeout(60)
def test_a_whole_run_reports_cpu_the_kernel_counted_for_its_process(tmp_path: Path) -> None:
    from tests.loadgen_servers import FakeEngine, ServerThread, plain_run_args

    engine = FakeEngine(ttft_s=0.002, itl_s=0.002)
    with ServerThread(engine.app) as server:
        args = plain_run_args(server.base_url, tmp_path, 40, 100, 8)
        summary, whole = _run(args)
    cpu = summary["client_cpu"]
    assert cpu["requests"] == summary["requests"]["total"] == 40
    assert 0 < cpu["load_s"] < cpu["total_s"] <= whole + 0.01  # clock ticks round the kernel's figure
    assert cpu["load_ms_per_request"] == pytest.approx(cpu["load_s"] * 1e3 / 40, rel=1e-3)
    assert 0 < cpu["load_cores"] < 2
    on_disk = json.loads(Path(glob.glob(str(tmp_path / "*" / "summary.json"))[0]).read_text())
    assert on_disk["client_cpu"] == cpu
    table = summary_table(summary)  # the console's summary: the section, before the closing line
    assert f"CPU over the load (s):{' ' * 19}{cpu['load_s']:.2f}" in table
    assert table.index("Client Cost") < table.rindex("=" * 50)


@pytest.mark.timeout(90)
def test_a_run_on_the_embedded_engine_leaves_the_engine_s_cpu_out(tmp_path: Path) -> None:
    args = ["run", "--target", "sim", "--num-prompts", "20", "--rate", "40", "--output-len", "fixed:8"]
    args += ["--quiet", "--json", "--linger", "0", "--metrics-port", "0", "--results-dir", str(tmp_path)]
    summary, whole = _run(args)
    cpu = summary["client_cpu"]
    assert cpu["embedded_engine_s"] > 0  # the engine served 20 streams from its thread
    assert cpu["load_s"] > 0
    assert cpu["load_s"] + cpu["embedded_engine_s"] <= whole + 0.01
