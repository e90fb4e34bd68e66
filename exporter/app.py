"""Wiring: which collectors run, the private registry, and the aiohttp app serving them.

Endpoints: /metrics (Prometheus text), /manifest (JSON), /healthz ("ok"). A private
CollectorRegistry is used, so importing this module never touches NVML. Which collectors exist is
collectors/registry.py's name -> factory map.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from exporter.collectors.base import Background, Collector, CollectorSet
from exporter.collectors.engine import EngineCollector
from exporter.collectors.registry import COLLECTORS, Sources, build_collectors
from exporter.engines import EngineInspector
from exporter.manifest import ManifestBuilder
from exporter.nvml.reading import DEFAULT_TIMEOUT_S
from exporter.nvml.session import NvmlSession
from exporter.webconfig import WebConfig


@dataclass
class ExporterConfig:
    """The exporter's resolved configuration (flags > env INFERGAUGE_EXPORTER_*)."""

    host: str = "0.0.0.0"
    port: int = 9402
    collectors: tuple[str, ...] = COLLECTORS
    engine_urls: list[str] = field(default_factory=list)
    discover: bool = True
    sample_interval_s: float = 1.0
    engine_api_key: str | None = None  # never logged or exported
    http_timeout_s: float = 1.0
    nvml_timeout_s: float = DEFAULT_TIMEOUT_S  # deadline for each GPU's NVML reading in a scrape


class Exporter:
    """The collectors (built from the name -> factory map), registry and manifest of one exporter."""

    def __init__(
        self,
        config: ExporterConfig,
        *,
        session: NvmlSession | None = None,
        inspector: EngineInspector | None = None,
    ) -> None:
        self.config = config
        self.sources = Sources(session or NvmlSession(), inspector)
        self.collectors: dict[str, Collector] = {c.name: c for c in build_collectors(config, self.sources)}
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(CollectorSet(list(self.collectors.values())))
        self.manifest = ManifestBuilder(list(self.collectors.values()))
        self._scrape_lock = threading.Lock()

    def metrics_text(self) -> bytes:
        """One scrape in Prometheus text format (serialised: one scrape at a time)."""
        with self._scrape_lock:
            return generate_latest(self.registry)

    def warm(self) -> None:
        """Start reading the engines in the background, so the first /manifest has facts to answer from."""
        engine = self.collectors.get("engine")
        if isinstance(engine, EngineCollector):
            engine.inspector.refresh_in_background()

    def manifest_json(self) -> bytes:
        """The manifest as JSON bytes."""
        return json.dumps(self.manifest.build(), indent=2, default=str).encode()

    def _background(self) -> list[Background]:
        return [c for c in self.collectors.values() if isinstance(c, Background)]

    def start(self) -> None:
        """Start the collectors' background work (the GPU sampler)."""
        for collector in self._background():
            collector.start()

    def tick(self) -> None:
        """One background pass now (what `--once metrics` does before its scrape)."""
        for collector in self._background():
            collector.tick()

    def stop(self) -> None:
        """Stop background work, release NVML."""
        for collector in self._background():
            collector.stop()


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def auth_middleware(web_config: WebConfig) -> Callable[[web.Request, Handler], Awaitable[web.StreamResponse]]:
    """401 unless the request carries valid basic-auth credentials (when users are configured)."""

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        ok = await asyncio.get_running_loop().run_in_executor(
            None, web_config.check, request.headers.get("Authorization")
        )
        if not ok:
            return web.Response(
                status=401,
                text="Unauthorized\n",
                headers={"WWW-Authenticate": 'Basic realm="infergauge-exporter"'},
            )
        return await handler(request)

    return middleware


def build_app(exporter: Exporter, web_config: WebConfig | None = None) -> web.Application:
    """The aiohttp application; scrapes run in a worker thread so the loop stays responsive."""
    middlewares: list[Any] = [auth_middleware(web_config)] if web_config and web_config.users else []
    app = web.Application(middlewares=middlewares)

    async def metrics(_request: web.Request) -> web.Response:
        body = await asyncio.get_running_loop().run_in_executor(None, exporter.metrics_text)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def manifest(_request: web.Request) -> web.Response:
        body = await asyncio.get_running_loop().run_in_executor(None, exporter.manifest_json)
        return web.Response(body=body, content_type="application/json")

    async def healthz(_request: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def index(_request: web.Request) -> web.Response:
        return web.Response(text="infergauge-exporter: /metrics /manifest /healthz\n")

    async def on_startup(_app: web.Application) -> None:
        exporter.start()

    async def on_cleanup(_app: web.Application) -> None:
        exporter.stop()

    app.router.add_get("/", index)
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/manifest", manifest)
    app.router.add_get("/healthz", healthz)
    app.on_startup.append(on_startup)
    app.on_cleanup.append(on_cleanup)
    return app
