"""What differs between the engines the simulator impersonates, behind one small interface."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from simengine.config import SimConfig
from simengine.request import RequestGroup
from simengine.sse import ChunkStyle
from simengine.state import AppState


@dataclass(frozen=True)
class LengthCheck:
    """Outcome of the context-length check: the max_tokens to use, or an error message."""

    max_tokens: int = 0
    error: str = ""
    param: str | None = None


def json_response(body: Any, status: int = 200) -> web.Response:
    """Compact JSON like the engines' (no spaces after separators)."""
    return web.Response(
        body=json.dumps(body, separators=(",", ":")).encode(), status=status, content_type="application/json"
    )


def build_choices(
    group: RequestGroup,
    chat: bool,
    texts: list[str],
    *,
    message_extra: dict[str, Any],
    chat_extra: dict[str, Any],
    text_extra: dict[str, Any],
) -> list[dict[str, Any]]:
    """Non-streaming choices, one per sequence; the `*_extra` fields are the engine's own, in its order."""
    choices: list[dict[str, Any]] = []
    for seq, text in zip(group.seqs, texts, strict=True):
        common = {"logprobs": None, "finish_reason": seq.finish_reason}
        if chat:
            message = {"role": "assistant", "content": text, **message_extra}
            choices.append({"index": seq.index, "message": message, **common, **chat_extra})
        else:
            choices.append({"index": seq.index, "text": text, **common, **text_extra})
    return choices


def usage_body(group: RequestGroup, cached_tokens: int | None = None, **extra: Any) -> dict[str, Any]:
    """The `usage` object of a non-streaming response (engine-specific fields appended);
    `cached_tokens` (None: not reported) goes in `prompt_tokens_details`."""
    p, c = group.prompt_tokens, group.completion_tokens
    return {
        "prompt_tokens": p,
        "total_tokens": p + c,
        "completion_tokens": c,
        "prompt_tokens_details": None if cached_tokens is None else {"cached_tokens": cached_tokens},
        **extra,
    }


def simulator_facts(cfg: SimConfig) -> dict[str, Any]:
    """The simulator's own part of every server-info body: the flags it accepted but does not model,
    secrets redacted (the one place server info shows launch flags that are not the engine's own)."""
    return {"engine": "simengine", "simulated": True, "unrecognized_args": cfg.effective_args()["extra_args"]}


async def not_found(request: web.Request) -> web.Response:
    """FastAPI's 404 for a route the server does not have (vLLM and SGLang are FastAPI apps)."""
    return json_response({"detail": "Not Found"}, status=404)


async def empty_ok(request: web.Request) -> web.Response:
    """200 with an empty body (health probes)."""
    return web.Response(status=200)


def metrics_response(state: AppState, content_type: str) -> web.Response:
    """The engine's current `/metrics` exposition text."""
    body = state.metrics.render(state.engine.scheduler)
    return web.Response(body=body, headers={"Content-Type": content_type})


class Personality:
    """Base class: the engine-specific bits the OpenAI handlers and routes need."""

    name = ""
    owned_by = ""
    completion_style: ChunkStyle
    chat_style: ChunkStyle

    def __init__(self, state: AppState) -> None:
        self.state = state

    def needs_auth(self, path: str) -> bool:
        """Whether `--api-key` guards `path`: every `/v1` route (`/v1/models` too), as vLLM's middleware
        does; health, metrics and metadata routes stay open (probes and the exporter read them)."""
        return path.startswith("/v1")

    def request_id(self, chat: bool) -> str:
        raise NotImplementedError

    def fingerprint(self) -> str:
        return ""

    def error(self, status: int, message: str, err_type: str, param: str | None = None) -> web.Response:
        raise NotImplementedError

    def reported_cached_tokens(self, group: RequestGroup) -> int | None:
        """`usage.prompt_tokens_details.cached_tokens` of a finished request (None: no details)."""
        return None

    def unknown_model(self, model: str) -> web.Response | None:
        """The response to a request naming another model (None = serve it anyway, as SGLang does)."""
        return None

    def response_model(self, requested: str | None) -> str:
        """The `model` field of responses: the served name (SGLang echoes whatever was asked)."""
        return self.state.cfg.served_model_name

    def check_length(self, prompt_len: int, max_tokens: int | None, chat: bool) -> LengthCheck:
        raise NotImplementedError

    def completion_body(
        self, group: RequestGroup, chat: bool, created: int, texts: list[str]
    ) -> dict[str, Any]:
        raise NotImplementedError

    def add_routes(self, app: web.Application) -> None:
        raise NotImplementedError
