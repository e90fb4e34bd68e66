"""A loopback aiohttp stand-in for Grafana's annotation API that records every call (Grafana cannot
run here): POST /api/annotations answers an id, 401 without the expected bearer token, `fail_with`
(an HTTP status) for everything when set."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.loadgen_servers import ServerThread


@dataclass
class Call:
    """One request as Grafana would have received it."""

    method: str
    path: str
    authorization: str | None
    body: Any


@dataclass
class GrafanaRecorder:
    """The recorder's state; `serve()` runs it in a thread (context manager giving the base URL)."""

    token: str
    fail_with: int | None = None
    calls: list[Call] = field(default_factory=list)

    def app(self) -> web.Application:
        """The aiohttp application."""
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        return app

    async def _handle(self, request: web.Request) -> web.Response:
        body = await request.json() if request.can_read_body else None
        self.calls.append(Call(request.method, request.path, request.headers.get("Authorization"), body))
        if self.fail_with:
            return web.json_response({"message": "failing on purpose"}, status=self.fail_with)
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            return web.json_response({"message": "Unauthorized"}, status=401)
        if (request.method, request.path) == ("POST", "/api/annotations"):
            return web.json_response({"message": "Annotation added", "id": 100 + len(self.calls)})
        return web.json_response({"message": "not found"}, status=404)

    def serve(self) -> ServerThread:
        """The recorder on 127.0.0.1, port chosen by the OS (`.base_url` once entered)."""
        return ServerThread(self.app)

    def annotations(self) -> list[dict[str, Any]]:
        """The bodies of the annotations posted with the right token."""
        wanted = f"Bearer {self.token}"
        return [
            c.body
            for c in self.calls
            if (c.method, c.path, c.authorization) == ("POST", "/api/annotations", wanted)
        ]
