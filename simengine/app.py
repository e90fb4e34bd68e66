"""The aiohttp application: shared state, startup/cleanup of the step loop, and the common routes."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from aiohttp import web

from simengine.config import SimConfig
from simengine.engine import Engine, MetricsRecorder
from simengine.faults import FaultInjector
from simengine.groundtruth import GroundTruthWriter


@dataclass
class AppState:
    """Everything the handlers share; one per application."""

    cfg: SimConfig
    metrics: MetricsRecorder
    engine: Engine
    faults: FaultInjector
    ground_truth: GroundTruthWriter | None
    started_wall: float = field(default_factory=time.time)
    request_count: int = 0


STATE: web.AppKey[AppState] = web.AppKey("simengine_state", AppState)


def build_app(config: SimConfig) -> web.Application:
    """The simulated engine as an aiohttp app; its step loop starts and stops with the app."""
    from simengine.openai_api import add_openai_routes
    from simengine.personalities import PERSONALITIES

    personality_cls = PERSONALITIES[config.personality]
    metrics = personality_cls.build_metrics(config)
    gt = GroundTruthWriter(config.ground_truth, config.ground_truth_tokens) if config.ground_truth else None
    faults = FaultInjector(
        config.seed,
        error_rate=config.fault_error_rate,
        stall_ms=config.fault_stall_ms,
        stall_rate=config.fault_stall_rate,
        disconnect_rate=config.fault_disconnect_rate,
        malformed_rate=config.fault_malformed_rate,
    )
    state = AppState(config, metrics, Engine(config, metrics), faults, gt)
    app = web.Application(client_max_size=64 * 2**20)
    app[STATE] = state
    personality = personality_cls(state)
    add_openai_routes(app, personality)
    personality.add_routes(app)
    app.on_startup.append(_on_startup)
    app.on_cleanup.append(_on_cleanup)
    return app


async def _on_startup(app: web.Application) -> None:
    state = app[STATE]
    if state.ground_truth is not None:
        state.ground_truth.open()
    await state.engine.start()


async def _on_cleanup(app: web.Application) -> None:
    state = app[STATE]
    await state.engine.stop()
    if state.ground_truth is not None:
        state.ground_truth.close()
