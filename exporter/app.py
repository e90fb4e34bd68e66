"""Wiring: which collectors run, the private registry, and the aiohttp app serving them.

Endpoints: /metrics (Prometheus text), /manifest (JSON), /healthz ("ok"). A private
CollectorRegistry is used, so importing this module never touches NVML.
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

from exporter.collectors.base import Collector, CollectorSet
from exporter.collectors.engine import EngineCollector
from exporter.collectors.gpu import GpuCollector
from exporter.collectors.host import HostCollector
from exporter.engines import EngineInspector
from exporter.gpu_facts import first_gpu_hint
from exporter.gpu_sampler import GpuSampler
from exporter.manifest import ManifestBuilder
from exporter.nvml import NvmlSession
from exporter.webconfig import WebConfig

COLLECTORS = ("gpu", "engine", "host")


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


class Exporter:
    """The collectors, sampler, registry and manifest builder of one exporter process."""

    def __init__(
        self,
        config: ExporterConfig,
        *,
        session: NvmlSession | None = None,
        inspector: EngineInspector | None = None,
    ) -> None:
        self.config = config
        wanted = set(config.collectors)
        self.session = (session or NvmlSession()) if "gpu" in wanted else None
        self.sampler = GpuSampler(self.session, config.sample_interval_s) if self.session else None
        self.inspector = (
            (
                inspector
                or EngineInspector(
                    config.engine_urls,
                    discover=config.discover,
                    api_key=config.engine_api_key,
                    http_timeout_s=config.http_timeout_s,
                )
            )
            if "engine" in wanted
            else None
        )
        collectors: list[Collector] = []
        if self.session is not None:
            collectors.append(GpuCollector(self.session, sampler=self.sampler))
        if self.inspector is not None:
            collectors.append(EngineCollector(self.inspector))
        if "host" in wanted:
            collectors.append(HostCollector())
        if self.inspector is not None and self.session is not None:
            self.inspector.gpu_memory_bytes, self.inspector.gpu_name = first_gpu_hint(self.session)
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(CollectorSet(collectors))
        self.manifest = ManifestBuilder(self.session, self.inspector, sampler=self.sampler)
        self._scrape_lock = threading.Lock()

    def metrics_text(self) -> bytes:
        """One scrape in Prometheus text format (serialised: one scrape at a time)."""
        with self._scrape_lock:
            return generate_latest(self.registry)

    def manifest_json(self) -> bytes:
        """The manifest as JSON bytes."""
        return json.dumps(self.manifest.build(), indent=2, default=str).encode()

    def start(self) -> None:
        """Start the background sampler."""
        if self.sampler is not None:
            self.sampler.start()

    def stop(self) -> None:
        """Stop the sampler, release NVML."""
        if self.sampler is not None:
            self.sampler.stop()
        if self.session is not None:
            self.session.shutdown()


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
