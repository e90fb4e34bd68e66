"""Helpers of the stack's integration tests: loopback replay servers, a real Prometheus, its HTTP API.

(Named test_stack_* to sit in the stack part's files; it holds no tests itself.)
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
EXPOSITION = "text/plain; version=0.0.4; charset=utf-8"


def free_port() -> int:
    """A loopback port nobody listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def metrics_body(path: Path) -> bytes:
    """A captured /metrics response without its HTTP status line and headers, when it has them."""
    text = path.read_text(encoding="utf-8")
    if text.startswith("HTTP/"):
        text = text.split("\n\n", 1)[1] if "\n\n" in text else text.split("\r\n\r\n", 1)[1]
    return text.encode()


class QuietHandler(BaseHTTPRequestHandler):
    """A loopback handler without an access log; `send_body` writes one whole response."""

    def send_body(self, status: int, content_type: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args: Any) -> None:
        return


class ReplayServer:
    """Serves captured /metrics snapshots in order, one per scrape, then keeps serving the last one."""

    def __init__(self, snapshots: list[Path]) -> None:
        self.bodies = [metrics_body(p) for p in snapshots]
        self.served = 0
        self._lock = threading.Lock()
        replay = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                if self.path.split("?")[0] != "/metrics":
                    self.send_error(404)
                    return
                self.send_body(200, EXPOSITION, replay.next_body())

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.instance = f"127.0.0.1:{self.server.server_address[1]}"
        self._thread: threading.Thread | None = None

    def next_body(self) -> bytes:
        with self._lock:
            body = self.bodies[min(self.served, len(self.bodies) - 1)]
            self.served += 1
            return body

    def start(self) -> ReplayServer:
        self._thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> ReplayServer:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()


def wait_for(predicate: Callable[[], Any], timeout_s: float, interval_s: float = 0.2) -> Any:
    """Poll until `predicate()` is truthy; its value, or TimeoutError naming what was awaited."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            value = predicate()
        except (OSError, ValueError):
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"not true within {timeout_s} s: {predicate}")
        time.sleep(interval_s)


def wait_http(url: str, timeout_s: float) -> None:
    """Wait until `url` answers 200."""

    def ok() -> bool:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return bool(resp.status == 200)

    wait_for(ok, timeout_s)


def start_prometheus(config: Path, port: int, data_dir: Path) -> subprocess.Popen[bytes]:
    """The real Prometheus binary on 127.0.0.1:`port`, ready to query."""
    proc = subprocess.Popen(
        [
            PROMETHEUS,
            f"--config.file={config}",
            f"--storage.tsdb.path={data_dir}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--storage.tsdb.retention.time=1h",
            "--log.level=warn",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_http(f"http://127.0.0.1:{port}/-/ready", 30)
    except TimeoutError:
        proc.kill()
        raise
    return proc


def prom_get(url: str, endpoint: str, **params: str) -> Any:
    """GET /api/v1/<endpoint> and return `data` (raises on an error status)."""
    query = urllib.parse.urlencode(params)
    try:
        with urllib.request.urlopen(f"{url}/api/v1/{endpoint}?{query}", timeout=10) as resp:
            payload = json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        raise AssertionError(f"{endpoint} {params}: HTTP {exc.code} {exc.read()[:300]!r}") from None
    assert payload["status"] == "success", payload
    data = payload["data"]
    return data["result"] if isinstance(data, dict) and "result" in data else data


class FakeGrafana:
    """A loopback stand-in for Grafana's HTTP API that checks requests the way Grafana would.

    Implements POST /api/annotations, PATCH /api/annotations/<id>, GET/POST /api/folders and
    POST /api/dashboards/db; answers 401 without the expected bearer token and `fail_with` (an HTTP
    status) for everything when set. Every request is kept in `requests` as (method, path, json body).
    """

    def __init__(self, token: str = "glsa_test_token", fail_with: int | None = None) -> None:
        self.token = token
        self.fail_with = fail_with
        self.requests: list[tuple[str, str, Any]] = []
        self.folders: set[str] = set()
        self.problems: list[str] = []
        grafana = self

        class Handler(QuietHandler):
            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                grafana.requests.append((self.command, self.path, body))
                if grafana.fail_with:
                    self._reply(grafana.fail_with, {"message": "failing on purpose"})
                elif self.headers.get("Authorization") != f"Bearer {grafana.token}":
                    self._reply(401, {"message": "Unauthorized"})
                else:
                    status, payload = grafana.route(self.command, self.path, body)
                    self._reply(status, payload)

            do_GET = do_POST = do_PATCH = do_PUT = _handle  # noqa: N815 (http.server's names)

            def _reply(self, status: int, payload: Any) -> None:
                self.send_body(status, "application/json", json.dumps(payload).encode())

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def route(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        """Grafana's answer to one authorised request (and a note in `problems` for a bad body)."""
        if method == "POST" and path == "/api/annotations":
            self._check_annotation(body, need_end=False)
            return 200, {"message": "Annotation added", "id": len(self.requests)}
        if method == "PATCH" and path.startswith("/api/annotations/"):
            self._check_annotation(body, need_end=True)
            return 200, {"message": "Annotation patched"}
        if method == "GET" and path.startswith("/api/folders/"):
            uid = path.rsplit("/", 1)[1]
            return (200, {"uid": uid}) if uid in self.folders else (404, {"message": "folder not found"})
        if method == "POST" and path == "/api/folders":
            self.folders.add(body["uid"])
            return 200, {"uid": body["uid"], "title": body["title"]}
        if method == "POST" and path == "/api/dashboards/db":
            uid = body["dashboard"]["uid"]
            return 200, {"status": "success", "uid": uid, "url": f"/d/{uid}/x", "version": 1}
        return 404, {"message": "not found"}

    def _check_annotation(self, body: Any, *, need_end: bool) -> None:
        if not isinstance(body.get("time"), int) or body["time"] < 1_500_000_000_000:
            self.problems.append(f"time must be epoch milliseconds: {body.get('time')!r}")
        end = body.get("timeEnd")
        if (need_end or end is not None) and (not isinstance(end, int) or end < body.get("time", 0)):
            self.problems.append(f"timeEnd must be epoch ms after time: {end!r}")
        if not isinstance(body.get("tags"), list) or not all(isinstance(t, str) for t in body["tags"]):
            self.problems.append(f"tags must be a list of strings: {body.get('tags')!r}")
        if not isinstance(body.get("text"), str) or not body["text"]:
            self.problems.append("text is required")

    def __enter__(self) -> FakeGrafana:
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
