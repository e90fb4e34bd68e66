"""What the handlers of one simulated engine share: its config, engine, metrics, faults and ground truth.

A leaf module: `app.py` builds an `AppState`, `openai_api.py` and the personalities read it, and none of
them imports another to get at it.
"""

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
