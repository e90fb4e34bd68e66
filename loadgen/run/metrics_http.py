"""The HTTP side of loadgen's live /metrics: a listen address, and the scrape that saw the run's end.

A run marks its end with `loadgen_run_end_timestamp_seconds > 0`; Prometheus tells a finished run from
one that vanished (`LoadgenRunVanished`) only if one scrape saw that mark. So `MetricsServer.stop`
waits, when someone has been scraping, for one response written after the end was marked (bounded by
twice the scrape interval seen + 1 s, the shipped 5 s interval assumed after a single scrape, at most
`MAX_FINAL_WAIT_S`); without scrapes it does not wait. A partial scrape (`?name[]=...`: a `--workers`
coordinator's progress poll) counts as a scrape but never as the one that saw the end.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any
from urllib.parse import parse_qs
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

MAX_FINAL_WAIT_S = 30.0
ASSUMED_INTERVAL_S = 5.0  # after a single scrape: the shipped Prometheus scrape interval
POLL_S = 0.05  # how soon `stop` ends the serving loop (http.server's default is 0.5 s)
WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, *_args: Any) -> None:
        return


class _SentBody:
    """A response body whose `close` (called by the WSGI server once it is written) reports it sent."""

    def __init__(self, body: Iterable[bytes], on_sent: Callable[[], None]) -> None:
        self.body, self.on_sent = body, on_sent

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.body)

    def close(self) -> None:
        self.on_sent()


class ScrapeWatch:
    """Scrape times, and whether a response written after `mark_end` was sent."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self.ended = False
        self.end_seen = threading.Event()

    def mark_end(self) -> None:
        """The run's end is set in the registry: the next full response shows it."""
        self.ended = True

    def wrap(self, app: WsgiApp) -> WsgiApp:
        """`app`, noting each response it serves."""

        def watched(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
            # read before the registry is collected; a partial scrape (`?name[]=...`, a --workers
            # coordinator's progress poll) does not show the whole end
            shows_end = self.ended and "name[]" not in parse_qs(environ.get("QUERY_STRING", ""))
            self.times = [*self.times[-2:], time.monotonic()]

            def sent() -> None:
                if shows_end:
                    self.end_seen.set()

            return _SentBody(app(environ, start_response), sent)

        return watched

    def final_wait_s(self) -> float:
        """How long to wait for a scrape of the end: 0 without scrapes or once one saw it."""
        if not self.ended or self.end_seen.is_set() or not self.times:
            return 0.0
        gaps = [b - a for a, b in zip(self.times, self.times[1:], strict=False)]
        interval = max(gaps) if gaps else ASSUMED_INTERVAL_S
        return min(2 * interval + 1.0, MAX_FINAL_WAIT_S)


class MetricsServer:
    """A registry's /metrics on `host:port` in a daemon thread."""

    def __init__(self, registry: CollectorRegistry, host: str, port: int, watch: ScrapeWatch) -> None:
        self.watch = watch
        family, addr = _family(host, port)
        server_class = type("MetricsWSGIServer", (ThreadingWSGIServer,), {"address_family": family})
        app = self.watch.wrap(make_wsgi_app(registry))
        self.server: WSGIServer = make_server(addr, port, app, server_class, handler_class=_QuietHandler)
        self.thread = threading.Thread(target=self.server.serve_forever, args=(POLL_S,), daemon=True)
        self.thread.start()

    @property
    def address(self) -> tuple[str, int]:
        """The bound (host, port)."""
        host, port = self.server.socket.getsockname()[:2]
        return str(host), int(port)

    def stop(self) -> None:
        """Wait (bounded) for a scrape that saw the run's end, then stop serving."""
        wait_s = self.watch.final_wait_s()
        if wait_s:
            self.watch.end_seen.wait(wait_s)
        self.server.shutdown()
        self.server.server_close()


def _family(host: str, port: int) -> tuple[socket.AddressFamily, str]:
    """The address family and literal address for `host` (an IPv4 or IPv6 address or a name)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise OSError(exc.errno, f"bad listen address {host!r}: {exc.strerror}") from None
    family, _, _, _, sockaddr = infos[0]
    return family, str(sockaddr[0])
