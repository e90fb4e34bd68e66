"""loadgen and the exporter against a REAL llama.cpp `llama-server` on the CPU (issue #24 item 2).

The server is the one `make llamacpp` builds from llama.cpp's source (the tree vendored in the
llama-cpp-python sdist, cmake and g++ from Debian), serving the tiny random-weight GGUF that
`tests/llamacpp/tiny_gguf.py` writes. It is found as $LLAMA_SERVER, `llama-server` on PATH, or
~/.cache/infergauge/llama.cpp/bin/llama-server; without one these tests are skipped and say how to
build it (a build takes about 10-20 minutes on 2 cores, too long for every CI run). The captures in
tests/fixtures/golden/llamacpp-b1-0c1e570 were taken from the same server and run in every CI run
(tests/unit/test_engines_llamacpp.py).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.test_stack_support import free_port, wait_http
from tests.loadgen_servers import loadgen_process

CACHED = Path.home() / ".cache" / "infergauge" / "llama.cpp" / "bin" / "llama-server"
pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


def llama_server() -> str | None:
    """The llama-server binary to run, None when there is none here."""
    for candidate in (os.environ.get("LLAMA_SERVER"), shutil.which("llama-server"), str(CACHED)):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def counter(base_url: str, name: str) -> float:
    with urllib.request.urlopen(f"{base_url}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    match = re.search(rf"^{re.escape(name)} (\S+)$", text, flags=re.M)
    assert match, f"{name} not in /metrics"
    return float(match.group(1))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    binary = llama_server()
    if binary is None:
        pytest.skip("no llama-server here: `make llamacpp` builds one from source (or set LLAMA_SERVER)")
    pytest.importorskip("gguf", reason="the gguf package writes the test model (make venv installs it)")
    from tests.llamacpp.tiny_gguf import write

    model = write(tmp_path_factory.mktemp("llamacpp") / "tiny.gguf")
    port = free_port()
    argv = [binary, "-m", str(model), "--host", "127.0.0.1", "--port", str(port)]
    argv += ["-np", "2", "-c", "2048", "--metrics", "-t", "1", "--no-warmup", "--alias", "tiny"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    base_url = f"http://127.0.0.1:{port}"
    try:
        wait_http(f"{base_url}/health", 60)
        yield base_url
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_loadgen_run_records_llama_cpp_and_its_exact_token_counts(server: str, tmp_path: Path) -> None:
    before = counter(server, "llamacpp:tokens_predicted_total")
    argv = ["run", "--target", "llamacpp", "--base-url", server, "--num-prompts", "12", "--rate", "20"]
    argv += ["--input-len", "fixed:48", "--output-len", "fixed:8", "--seed", "3", "--warmup", "0"]
    argv += ["--metrics-port", "0", "--results-dir", str(tmp_path), "--quiet", "--json", "--linger", "0"]
    done = loadgen_process(*argv, timeout=180)
    assert done.returncode == 0, done.stderr
    (run_dir,) = [p for p in tmp_path.iterdir() if p.is_dir() and not p.name.startswith(".")]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    summary = json.loads((run_dir / "summary.json").read_text())
    engine = manifest["engine"]
    assert engine["engine"] == "llamacpp"
    assert engine["version"].startswith("b")  # /props build_info, e.g. b1-0c1e570
    assert engine["params"]["max_num_seqs"] == 2  # /props total_slots: the -np 2 it runs with
    assert summary["requests"]["ok"] == 12
    lines = [json.loads(x) for x in (run_dir / "requests.jsonl").read_text().splitlines()]
    assert [line["output_tokens"] for line in lines] == [8] * 12  # ignore_eos + max_tokens honoured
    # the tokens loadgen counted are the ones the server says it generated
    assert counter(server, "llamacpp:tokens_predicted_total") - before == 12 * 8


def test_the_exporter_discovers_it_from_its_process(server: str) -> None:
    port = server.rsplit(":", 1)[1]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "exporter",
            "--once",
            "manifest",
            "--collector",
            "engine",
            "--collector",
            "host",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    found = [e for e in json.loads(done.stdout)["engines"] if str((e.get("args") or {}).get("port")) == port]
    assert [e["engine"] for e in found] == ["llamacpp"]
    assert found[0]["args"]["parallel"] == 2
