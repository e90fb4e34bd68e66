"""Prefix-cache flushes between runs against a loopback server that refuses at first, as SGLang
does while requests are still running."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from loadgen.experiments import runner
from loadgen.experiments.runner import flush_external


class _Refusing(BaseHTTPRequestHandler):
    refusals = 0
    calls: list[str] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        type(self).calls.append(self.path)
        busy = len(type(self).calls) <= type(self).refusals
        self.send_response(400 if busy else 200)
        self.end_headers()
        self.wfile.write(b"requests are running" if busy else b"ok")

    def log_message(self, *args: object) -> None:
        pass


def _serve(refusals: int) -> Iterator[tuple[str, list[str]]]:
    handler = type("H", (_Refusing,), {"refusals": refusals, "calls": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler.calls
    finally:
        server.shutdown()


@pytest.fixture
def fast_retry(monkeypatch):
    monkeypatch.setattr(runner, "FLUSH_RETRY_S", 0.01)


def test_a_refused_flush_is_retried(fast_retry):
    for url, calls in _serve(refusals=1):
        cache = flush_external("sglang", url)
        assert cache["flushed"] is True
        assert cache["method"] == "POST /flush_cache"
        assert "(attempt 2)" in cache["detail"]
        assert calls == ["/flush_cache", "/flush_cache"]


def test_a_flush_refused_every_time_marks_the_run(fast_retry):
    for url, calls in _serve(refusals=99):
        cache = flush_external("vllm", url)
        assert cache["flushed"] is False
        assert cache["method"] == "POST /reset_prefix_cache"
        assert "status 400" in cache["detail"]
        assert len(calls) == runner.FLUSH_ATTEMPTS
