"""Issue 10, done-when 6: secrets planted in every flag form and in the environment reach no output.

The engine's process line is a vLLM one (`python3 <dir>/vllm serve ...`, the simulated vLLM behind
it) carrying `--api-key k1 k2`, `--api-keys`, `--hf-token=…`, `--db-passwd`, `--auth-header`,
`--bearer`, `--key-path`; its environment has HF_TOKEN; the exporter URL carries user:password@.
None of them may appear in the exporter's /manifest or /metrics labels, in any file of the run
(manifest, summary, requests, runs.csv, the store), in loadgen's log lines or in the simulated
engine's server info.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from exporter.app import Exporter, ExporterConfig
from exporter.discovery import read_processes
from exporter.engines import EngineInspector
from tests.conftest import REPO_ROOT

KEY = "sk-live-k1-9f3a"
SECRETS = {
    "api key": KEY,
    "second api key": "sk-live-k2-77c1",
    "plural api keys": "sk-plural-k3-e2d0",
    "hf token flag": "hf_flag_51bd0e",
    "db password": "dbpass-0c44",
    "auth header": "authhdr-8a1f",
    "bearer": "bearer-3d9e",
    "key path": "/secret/keypath-6b2c",
    "env token": "hf_env_1aa7c3",
    "url password": "urlpass-41f0",
}
# Runs the simulated engine for a vLLM launch line: positional model -> --model, and only the first
# value of --api-key (the simulator takes one; vLLM takes several).
SHIM = f"""#!{sys.executable}
import sys
from simengine.cli import main
args, out, i = sys.argv[3:], ["--personality", "vllm", "--model", sys.argv[2]], 0
while i < len(args):
    out.append(args[i])
    if args[i] == "--api-key":
        out.append(args[i + 1])
        i += 1
        while i + 1 < len(args) and not args[i + 1].startswith("--"):
            i += 1
    i += 1
sys.exit(main(out))
"""


def engine_argv(shim: Path) -> list[str]:
    s = SECRETS
    return [
        *(sys.executable, str(shim), "serve", "tiny-llama", "--max-num-seqs", "4"),
        *("--api-key", KEY, s["second api key"], "--api-keys", s["plural api keys"]),
        *(f"--hf-token={s['hf token flag']}", "--db-passwd", s["db password"]),
        *("--auth-header", s["auth header"], "--bearer", s["bearer"], "--key-path", s["key path"]),
        *("--host", "127.0.0.1", "--port", "0"),
    ]


@contextmanager
def engine(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    shim = tmp_path / "bin" / "vllm"
    shim.parent.mkdir()
    shim.write_text(SHIM)
    env = {**os.environ, "HF_TOKEN": SECRETS["env token"], "VLLM_SERVER_DEV_MODE": "1"}
    proc = subprocess.Popen(
        engine_argv(shim), cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        match = re.search(r"listening on (http://\S+)", proc.stdout.readline())
        assert match, "simulated engine did not start"
        yield proc, match.group(1)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@contextmanager
def exporter_for(pid: int) -> Iterator[Exporter]:
    inspector = EngineInspector(
        api_key=KEY,
        ask_interpreter=lambda p, e: None,
        read_procs=lambda: [p for p in read_processes() if pid in (p.pid, p.ppid)],
    )
    yield Exporter(ExporterConfig(collectors=("engine", "host")), inspector=inspector)


@contextmanager
def serve_manifest(exporter: Exporter) -> Iterator[int]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            self.send_response(200)
            self.end_headers()
            self.wfile.write(exporter.manifest_json())

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()


def leaked(text: str | bytes) -> list[str]:
    data = text.encode() if isinstance(text, str) else text
    return [name for name, secret in SECRETS.items() if secret.encode() in data]


def test_no_secret_reaches_any_output(tmp_path: Path) -> None:
    results = tmp_path / "results"
    with engine(tmp_path) as (proc, url), exporter_for(proc.pid) as exporter:
        request = urllib.request.Request(f"{url}/server_info", headers={"Authorization": f"Bearer {KEY}"})
        with urllib.request.urlopen(request, timeout=5) as response:  # noqa: S310 - loopback
            server_info = response.read()
        manifest, metrics = exporter.manifest_json(), exporter.metrics_text()
        with serve_manifest(exporter) as port:
            exporter_url = f"http://exporter:{SECRETS['url password']}@127.0.0.1:{port}"
            argv = [sys.executable, "-m", "loadgen.cli.main", "run", "--target", "vllm", "--base-url", url]
            argv += ["--api-key", KEY, "--exporter-url", exporter_url, "--num-prompts", "4"]
            argv += [
                "--profile",
                "short",
                "--metrics-port",
                "0",
                "--linger",
                "0",
                "--results-dir",
                str(results),
            ]
            done = subprocess.run(
                argv, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, check=False
            )
    assert done.returncode == 0, done.stderr[-2000:]
    engines = json.loads(manifest)["engines"]
    assert engines[0]["engine"] == "vllm"  # the planted line was found and parsed
    assert engines[0]["params"]["max_num_seqs"] == 4
    assert leaked(manifest) == []
    assert leaked(metrics) == []
    assert leaked(server_info) == []
    assert leaked(done.stdout + done.stderr) == []
    files = [p for p in results.rglob("*") if p.is_file()]
    assert {p.name for p in files} >= {"manifest.json", "summary.json", "requests.jsonl", "runs.csv"}
    assert {p.name: leaked(p.read_bytes()) for p in files} == {p.name: [] for p in files}
