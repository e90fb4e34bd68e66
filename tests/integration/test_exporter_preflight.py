"""`loadgen preflight`: tables from a real exporter's /manifest, exit 1 on an error check, 2 on bad input."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from bench.exporter_scrape import start_exporter
from loadgen.cli.preflight import preflight


@pytest.fixture(scope="module")
def exporter_url() -> Iterator[str]:
    proc, base = start_exporter(["--fake-gpus", "2", "--sample-interval", "0"])
    try:
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def serve_manifest(manifest: dict[str, Any], seen_auth: list[str]) -> ThreadingHTTPServer:
    body = json.dumps(manifest).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            seen_auth.append(self.headers.get("Authorization", ""))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_tables_from_a_real_exporter(exporter_url: str, tmp_path: Path) -> None:
    saved = tmp_path / "manifest.json"
    result = CliRunner().invoke(preflight, ["--exporter-url", exporter_url, "--save", str(saved)])
    assert result.exit_code == 0, result.output
    assert "NVIDIA H200 (fake)" in result.output
    assert "interconnect: nvlink" in result.output
    assert "clocks_not_locked" in result.output
    assert len(json.loads(saved.read_text())["gpus"]) == 2


def test_error_check_exits_1_and_credentials_in_url_become_basic_auth() -> None:
    manifest = {
        "host": {},
        "gpus": [],
        "topology": {},
        "engines": [],
        "checks": [{"id": "gpu_throttling", "severity": "error", "message": "gpu 0 is throttled now"}],
    }
    seen: list[str] = []
    server = serve_manifest(manifest, seen)
    try:
        url = f"http://prom:pw@127.0.0.1:{server.server_port}"
        result = CliRunner().invoke(preflight, ["--exporter-url", url])
    finally:
        server.shutdown()
    assert result.exit_code == 1
    assert "gpu_throttling" in result.output
    assert seen == ["Basic cHJvbTpwdw=="]  # base64("prom:pw")
    assert "pw@" not in result.output


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--exporter-url", "gpu-host:9402"], "'gpu-host:9402' is not an http(s) URL"),
        (
            ["--exporter-url", "http://127.0.0.1:9", "--timeout", "2"],
            "cannot read http://127.0.0.1:9/manifest",
        ),
    ],
)
def test_bad_input_is_one_line_exit_2(args: list[str], needle: str) -> None:
    result = CliRunner().invoke(preflight, args)
    assert result.exit_code == 2
    assert needle in result.output
    assert len(result.output.strip().splitlines()) == 1
