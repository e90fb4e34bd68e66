"""The aiohttp application: builds the shared state, starts/stops the step loop, adds the common routes."""

from __future__ import annotations

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from simengine.config import SimConfig
from simengine.engine import Engine
from simengine.faults import FaultInjector
from simengine.groundtruth import GroundTruthWriter
from simengine.openai_api import add_openai_routes, authorized
from simengine.personalities.base import Personality
from simengine.personalities.registry import PERSONALITIES
from simengine.state import STATE, AppState


def build_app(config: SimConfig) -> web.Application:
    """The simulated engine as an aiohttp app; its step loop starts and stops with the app."""
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
    personality = personality_cls(state)
    app = web.Application(client_max_size=64 * 2**20, middlewares=[_auth_middleware(personality)])
    app[STATE] = state
    add_openai_routes(app, personality)
    personality.add_routes(app)
    app.router.add_get("/sim/stats", _sim_stats)
    app.router.add_post("/sim/stats/reset", _sim_stats_reset)
    app.on_startup.append(_on_startup)
    app.on_shutdown.append(_on_shutdown)  # before aiohttp waits for open handlers
    app.on_cleanup.append(_on_cleanup)
    return app


def _auth_middleware(personality: Personality) -> Middleware:
    """`--api-key`: the routes the personality's engine guards answer 401 without a matching bearer
    token (`/sim/*`, the simulator's own endpoints, stay open)."""

    @web.middleware
    async def auth(request: web.Request, handler: Handler) -> web.StreamResponse:
        path = request.path
        if (
            path.startswith("/sim/")
            or not personality.needs_auth(path)
            or authorized(request, personality.state)
        ):
            return await handler(request)
        return web.json_response({"error": "Unauthorized"}, status=401)

    return auth


async def _on_startup(app: web.Application) -> None:
    state = app[STATE]
    if state.ground_truth is not None:
        state.ground_truth.open()
    await state.engine.start()


async def _on_shutdown(app: web.Application) -> None:
    await app[STATE].engine.stop()


async def _on_cleanup(app: web.Application) -> None:
    state = app[STATE]
    await state.engine.stop()
    if state.ground_truth is not None:
        state.ground_truth.close()


def _percentile(sorted_values: list[int], q: float) -> float:
    if not sorted_values:
        return 0.0
    return float(sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))])


async def _sim_stats(request: web.Request) -> web.Response:
    """Simulator-only: step timing error and load, for benchmarks and tests (not an engine endpoint)."""
    engine = request.app[STATE].engine
    late = sorted(engine.step_lateness_ns)
    sched = engine.scheduler
    body = {
        "steps": len(late),
        "step_lateness_ms": {
            "p50": _percentile(late, 0.50) / 1e6,
            "p99": _percentile(late, 0.99) / 1e6,
            "max": (late[-1] / 1e6) if late else 0.0,
        },
        "step_model_ms_mean": (sum(engine.step_model_ns) / len(engine.step_model_ns) / 1e6)
        if engine.step_model_ns
        else 0.0,
        "generation_tokens": sched.counters.generation_tokens,
        "preemptions": sched.counters.preemptions,
        "running": len(sched.running),
        "waiting": len(sched.waiting),
        "in_flight": engine.in_flight,
        "kv_cache_usage": sched.kv.usage(),
    }
    return web.json_response(body)


async def _sim_stats_reset(request: web.Request) -> web.Response:
    engine = request.app[STATE].engine
    engine.step_lateness_ns.clear()
    engine.step_model_ns.clear()
    return web.Response(status=204)
