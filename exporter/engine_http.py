"""Asking a running engine about itself over HTTP: answering, ready, version, model, server args.

Every metadata endpoint a registered engine answers is asked once (`infergauge.engines.metadata_paths`),
all at the same time, and the engine is recognised from what the bodies *contain* (`detect_http`),
not from which endpoint answered: a vLLM in dev mode and the simulated vLLM answer `/server_info` too.
*Answering* (`up`) means some endpoint gave an HTTP answer; *ready* means the engine's readiness
endpoint (the spec's `readiness_path`, `/health`) said 200. An endpoint that times out is listed in
`timed_out`: it says nothing about `up`, and the caller may keep that endpoint's last facts.
"""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from infergauge.engines import (
    ENGINES,
    EngineSpec,
    detect_http,
    info_metric_paths,
    metadata_paths,
    readiness_paths,
    readiness_timeout_s,
)
from infergauge.engines.resolve import info_metric_args
from infergauge.redact import redact_url


@dataclass
class EngineHttpFacts:
    """What the endpoints said: `up` = some endpoint answered HTTP, `ready` = readiness said 200."""

    url: str
    up: bool = False
    ready: bool = False
    engine: str | None = None
    version: str | None = None
    model: str | None = None
    max_model_len: int | None = None
    server_args: dict[str, Any] = field(default_factory=dict)  # the server-info body's scalar fields
    server_info: dict[str, Any] | None = None  # the whole server-info body, for resolve()
    server_info_path: str = ""
    reported: dict[str, Any] = field(default_factory=dict)  # args its info metric states (/metrics)
    timed_out: list[str] = field(default_factory=list)  # endpoints that gave no answer in time


class Unreachable(Exception):
    """Nothing answers at that address (refused, no route)."""


class TimedOut(Unreachable):
    """The address accepted the connection but gave no answer in time."""


@dataclass(frozen=True)
class Answer:
    """One endpoint's answer: its HTTP status and JSON body (None when not JSON or not 200), or the
    text of a 200 body that is not JSON (a /metrics page)."""

    status: int
    body: Any = None
    text: str = ""


def _timeout(exc: BaseException) -> bool:
    reason = getattr(exc, "reason", exc)
    return isinstance(reason, TimeoutError | socket.timeout) or "timed out" in str(reason)


def get_answer(url: str, timeout_s: float, headers: dict[str, str] | None = None) -> Answer:
    """GET `url`: its status and JSON body; TimedOut / Unreachable when no HTTP answer came."""
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:  # noqa: S310 - user-given URL
            raw = response.read(2_000_000)
            status = int(response.status)
    except urllib.error.HTTPError as exc:
        return Answer(exc.code)
    except (urllib.error.URLError, OSError) as exc:
        raise (TimedOut if _timeout(exc) else Unreachable)(str(exc)) from exc
    try:
        return Answer(status, json.loads(raw) if status == 200 and raw else None)
    except ValueError:
        return Answer(status, text=raw.decode("utf-8", "replace") if status == 200 else "")


def facts_from_bodies(url: str, bodies: dict[str, Any]) -> EngineHttpFacts:
    """Pure: the facts a set of metadata bodies ({path: JSON or None}) tell about one engine."""
    facts = EngineHttpFacts(url=url, up=any(body is not None for body in bodies.values()))
    models = bodies.get("/v1/models")
    if isinstance(models, dict) and models.get("data"):
        first = models["data"][0]
        facts.model = str(first.get("id"))
        if isinstance(first.get("max_model_len"), int):
            facts.max_model_len = first["max_model_len"]
    spec = detect_http(bodies)
    if spec is None:
        return facts
    facts.engine = spec.name
    _server_info(spec, bodies, facts)
    version = bodies.get(spec.version_path or "")
    if isinstance(version, dict) and version.get("version"):
        facts.version = str(version["version"])
    return facts


def facts_from_answers(url: str, answers: dict[str, Answer | None]) -> EngineHttpFacts:
    """Pure: facts from every endpoint's answer ({path: Answer, or None when it timed out})."""
    facts = facts_from_bodies(url, {p: a.body for p, a in answers.items() if a is not None})
    facts.up = any(answer is not None for answer in answers.values())
    facts.timed_out = [path for path, answer in answers.items() if answer is None]
    spec = ENGINES.get(facts.engine or "")
    if spec is not None and spec.info_metric is not None:
        page = answers.get(spec.info_metric.path)
        facts.reported = info_metric_args(spec, page.text) if page is not None else {}
    paths = (spec.readiness_path,) if spec is not None else readiness_paths()
    facts.ready = any((a := answers.get(p)) is not None and a.status == 200 for p in paths)
    return facts


def _server_info(spec: EngineSpec, bodies: dict[str, Any], facts: EngineHttpFacts) -> None:
    for path in spec.server_info.paths:
        info = bodies.get(path)
        if isinstance(info, dict) and info:
            facts.server_info, facts.server_info_path = info, path
            facts.server_args = {
                k: v for k, v in info.items() if isinstance(v, str | int | float | bool) or v is None
            }
            key = spec.server_info.version_key
            if key and info.get(key):
                facts.version = str(info[key])
            return


def _ask(url: str, timeout_s: float, headers: dict[str, str]) -> Answer | None | Unreachable:
    try:
        return get_answer(url, timeout_s, headers)
    except TimedOut:
        return None
    except Unreachable as exc:
        return exc


def poll_engine(base_url: str, timeout_s: float = 1.0, api_key: str | None = None) -> EngineHttpFacts:
    """Ask `base_url` its readiness and every metadata endpoint at once: `timeout_s` each (a
    readiness endpoint the longer time its engine needs, e.g. SGLang's generating /health)."""
    base = base_url.rstrip("/")
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    ready = {path: readiness_timeout_s(path, timeout_s) for path in readiness_paths()}
    limits = {**{path: timeout_s for path in metadata_paths() + info_metric_paths()}, **ready}
    with ThreadPoolExecutor(max_workers=len(limits)) as pool:
        futures = {p: pool.submit(_ask, f"{base}{p}", limit, headers) for p, limit in limits.items()}
        asked = {path: future.result() for path, future in futures.items()}
    if all(isinstance(answer, Unreachable) for answer in asked.values()):
        return EngineHttpFacts(url=redact_url(base))  # refused: down, and nothing timed out
    answers = {p: a for p, a in asked.items() if not isinstance(a, Unreachable)}
    return facts_from_answers(redact_url(base), answers)
