"""Which phase of start-up a launched engine is in: listening, healthy, serving a model.

A slow start is told apart by phase so the message points at the cause: the process runs but its
port is not listening yet (still loading: weights, compilation), the port listens but the readiness
path does not answer 200 (the server is up, the engine is not), or it answers 200 and `/v1/models`
lists no model yet. Reading (`read_probe`) is apart from naming the phase (`slow_phase`, pure).
"""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from dataclasses import dataclass
from urllib.parse import urlsplit

MODELS_PATH = "/v1/models"
_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class Probe:
    """What one look at a starting engine saw."""

    listening: bool
    health_status: int | None  # None: no HTTP answer
    models: int | None  # models /v1/models lists; None: no readable answer


def slow_phase(probe: Probe, health_path: str) -> str | None:
    """None when the engine is ready; else the start-up phase it is stuck in, in words."""
    if not probe.listening:
        return "process alive but its port is not listening yet"
    if probe.health_status != 200:
        answer = "no HTTP answer" if probe.health_status is None else f"status {probe.health_status}"
        return f"port listening but {health_path} not 200 ({answer})"
    if not probe.models:
        return f"{health_path} answers 200 but {MODELS_PATH} lists no model yet"
    return None


def _listening(base_url: str) -> bool:
    parts = urlsplit(base_url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", port), timeout=_TIMEOUT_S):
            return True
    except OSError:
        return False


def _get(url: str, api_key: str | None = None) -> tuple[int | None, bytes]:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        request = urllib.request.Request(url, headers=headers)
        with urllib.request.urlopen(request, timeout=_TIMEOUT_S) as resp:  # noqa: S310 - the plan's engine URL
            return int(resp.status), resp.read()
    except urllib.error.HTTPError as exc:
        return int(exc.code), b""
    except (urllib.error.URLError, OSError, ValueError):
        return None, b""


def _model_count(body: bytes) -> int | None:
    try:
        data = json.loads(body).get("data")
    except (ValueError, AttributeError):
        return None
    return len(data) if isinstance(data, list) else None


def read_probe(base_url: str, health_path: str, api_key: str | None = None) -> Probe:
    """Look at the engine once: port, readiness path, model list (each asked only if the last passed;
    the model list with the run's bearer token: an engine started with --api-key guards /v1)."""
    if not _listening(base_url):
        return Probe(False, None, None)
    status, _ = _get(base_url + health_path)
    if status != 200:
        return Probe(True, status, None)
    models_status, body = _get(base_url + MODELS_PATH, api_key)
    return Probe(True, status, _model_count(body) if models_status == 200 else None)
