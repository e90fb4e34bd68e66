"""Issue 22 item 17: any exporter was attached to a run silently, and its other engines' facts became
causes in diffs (`exporter.engines: 93 -> 0`). Now a run attaches only an exporter that watches its
target, named or not. It keeps only that engine, says on the console which exporter it attached, and
says when none was.

Real runs against the simulated engine; the exporters are loopback servers answering /manifest.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from loadgen.analysis.diff import manifest_differences
from loadgen.cli.main import cli
from simengine.embedded import EmbeddedEngine

pytestmark = pytest.mark.timeout(90)
OTHERS = [{"engine": "sglang", "url": f"http://127.0.0.1:{30001 + i}", "args": {}} for i in range(93)]


@contextmanager
def exporter(engines: list[dict[str, Any]]) -> Iterator[str]:
    body = json.dumps({"host": {"hostname": "gpu-host"}, "gpus": [], "engines": engines, "checks": []})

    class Manifest(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *args: object) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Manifest)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()


def _run(base_url: str, exporter_url: str, results: Path) -> tuple[str, dict, dict]:
    args = ["run", "--target", "vllm", "--base-url", base_url, "--exporter-url", exporter_url]
    args += ["--num-prompts", "3", "--profile", "short", "--metrics-port", "0", "--store", "none", "--quiet"]
    result = CliRunner().invoke(cli, [*args, "--results-dir", str(results)])
    assert result.exit_code == 0, result.output
    (run_dir,) = [p for p in results.iterdir() if p.is_dir()]
    read = lambda name: json.loads((run_dir / name).read_text())  # noqa: E731
    return result.output, read("manifest.json"), read("summary.json")


def test_msgs_exporter_attach_only_the_watching_one_and_say_so(tmp_path: Path) -> None:
    with EmbeddedEngine(["--personality", "vllm"]) as engine:
        ours = {"engine": "vllm", "url": engine.base_url, "version": "0.26.0", "args": {"max_num_seqs": 64}}
        with exporter([*OTHERS, ours]) as watching, exporter(OTHERS) as elsewhere:
            out_a, manifest_a, summary_a = _run(engine.base_url, watching, tmp_path / "a")
            out_b, manifest_b, summary_b = _run(engine.base_url, elsewhere, tmp_path / "b")
    assert f"exporter: {watching}/manifest (watches vllm 0.26.0 at {engine.base_url})" in out_a
    assert manifest_a["exporter"]["engines"] == [ours]  # the 93 other engines are not this run's facts
    assert manifest_a["engine"]["params"]["max_num_seqs"] == 64
    assert manifest_a["engine"]["param_sources"]["max_num_seqs"] == "exporter /proc cmdline"

    assert f"warning: no exporter attached (not attached: the exporter at {elsewhere}/manifest" in out_b
    assert manifest_b["exporter"] is None  # named, but it watches other engines: not attached
    assert manifest_b["exporter_source"].startswith("not attached: ")

    diffs = manifest_differences(manifest_a, manifest_b, summary_a, summary_b)
    engines_row = next(d for d in diffs if d.key == "exporter.engines")
    assert (engines_row.a, engines_row.b, engines_row.group) == (1, 0, "context")  # before: 93 -> 0
    assert not [d.key for d in diffs if d.key.startswith("exporter") and d.group != "context"]
    assert "cache.implied_hit_tokens" not in [d.key for d in diffs]  # a count, not a cause
