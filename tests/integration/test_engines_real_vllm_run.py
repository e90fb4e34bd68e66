"""Issue 10, done-when 1: a real-vLLM-shaped run keeps its launch flags.

The simulated vLLM is started with vLLM's exact launch line from the real runs
(golden/real-runs-2026-12-01/cmdlines-vllm-64.txt and -8.txt: `python3 .../vllm serve MODEL ...`), with
no dev mode, so, as with a real default vLLM, nothing over HTTP need tell `max_num_seqs` (the test
holds whether or not the simulated vLLM answers `/server_info` outside dev mode). The exporter
reads it from the process's command line in /proc, loadgen attaches that exporter, and the run's
one resolution records `engine.params.max_num_seqs` with its source; runs.csv and `loadgen report`
then keep a 64 run and an 8 run apart.
"""

from __future__ import annotations

import csv
import json
import os
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from click.testing import CliRunner

from exporter.app import Exporter, ExporterConfig
from exporter.discovery import read_processes
from exporter.engines import EngineInspector
from loadgen.cli.report import report
from tests.conftest import FIXTURES, REPO_ROOT

REAL_RUNS = FIXTURES / "golden" / "real-runs-2026-12-01"
# The shim is named `vllm` so that its process's command line is vLLM's own; inside, it runs the
# simulated engine with the positional model turned into --model (what `vllm serve MODEL` means).
SHIM = f"""#!{sys.executable}
import sys
from simengine.cli import main
args = sys.argv[2:]
sys.exit(main(["--personality", "vllm", "--model", args[0], *args[1:]]))
"""


def vllm_line(name: str, port: int) -> list[str]:
    """The API-server command line of a real run, its port swapped for a free one."""
    for line in (REAL_RUNS / name).read_text().splitlines():
        argv = line.split(": ", 1)[1].split()
        if "serve" in argv:
            return [*argv[: argv.index("--port") + 1], str(port)]
    raise AssertionError(f"no vllm serve line in {name}")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def fake_vllm(tmp_path: Path, cmdlines: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """The simulated vLLM, launched as `python3 <dir>/vllm serve ...` (the real run's argv)."""
    shim = tmp_path / "bin" / "vllm"
    shim.parent.mkdir(exist_ok=True)
    shim.write_text(SHIM)
    argv = vllm_line(cmdlines, free_port())
    argv[0:2] = [sys.executable, str(shim)]
    env = {k: v for k, v in os.environ.items() if k != "VLLM_SERVER_DEV_MODE"}
    proc = subprocess.Popen(
        argv, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        assert proc.stdout is not None
        match = re.search(r"listening on (http://\S+)", proc.stdout.readline())
        assert match, "simulated vLLM did not start"
        yield proc, match.group(1)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@contextmanager
def exporter_for(pid: int) -> Iterator[str]:
    """The real exporter (engine + host collectors, /proc discovery narrowed to `pid`), its /manifest
    served on a loopback port."""
    inspector = EngineInspector(
        ask_interpreter=lambda p, e: None,
        read_procs=lambda: [p for p in read_processes() if pid in (p.pid, p.ppid)],
    )
    exporter = Exporter(ExporterConfig(collectors=("engine", "host")), inspector=inspector)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            body = exporter.manifest_json() if self.path == "/manifest" else b"{}"
            self.send_response(200 if self.path == "/manifest" else 404)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


def run_loadgen(base_url: str, exporter_url: str, results: Path) -> dict[str, object]:
    argv = [sys.executable, "-m", "loadgen.cli.main", "run", "--target", "vllm", "--base-url", base_url]
    argv += ["--exporter-url", exporter_url, "--num-prompts", "8", "--profile", "short", "--seed", "1"]
    argv += ["--metrics-port", "0", "--linger", "0", "--results-dir", str(results)]
    done = subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    run_dirs = sorted(p for p in results.iterdir() if (p / "manifest.json").is_file())
    return dict(json.loads((run_dirs[-1] / "manifest.json").read_text()))


def test_real_vllm_shaped_runs_keep_max_num_seqs(tmp_path: Path) -> None:
    results = tmp_path / "results"
    run_ids = []
    for cmdlines, expected in (("cmdlines-vllm-64.txt", 64), ("cmdlines-vllm-8.txt", 8)):
        with fake_vllm(tmp_path, cmdlines) as (proc, url), exporter_for(proc.pid) as exporter_url:
            manifest = run_loadgen(url, exporter_url, results)
        engine = manifest["engine"]
        assert isinstance(engine, dict)
        assert engine["params"]["max_num_seqs"] == expected
        assert engine["param_sources"]["max_num_seqs"] == "exporter /proc cmdline"
        assert engine["params"]["gpu_memory_utilization"] == 0.5
        run_ids.append(str(manifest["run_id"]))
    with (results / "runs.csv").open() as handle:
        rows = {row["run_id"]: row for row in csv.DictReader(handle)}
    assert [rows[run_id]["max_num_seqs"] for run_id in run_ids] == ["64", "8"]
    out = tmp_path / "report"
    done = CliRunner().invoke(report, [*run_ids, "--results-dir", str(results), "--out", str(out)])
    assert done.exit_code == 0, done.output
    text = (out / "report.md").read_text()
    assert "**Runs:** 2 in 2 series" in text
    assert "max_num_seqs=64" in text
    assert "max_num_seqs=8" in text
