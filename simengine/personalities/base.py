"""What differs between the engines the simulator impersonates, behind one small interface."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aiohttp import web

from simengine.sse import ChunkStyle

if TYPE_CHECKING:
    from simengine.app import AppState
    from simengine.request import RequestGroup


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


class Personality:
    """Base class: the engine-specific bits the OpenAI handlers and routes need."""

    name = ""
    owned_by = ""
    completion_style: ChunkStyle
    chat_style: ChunkStyle

    def __init__(self, state: AppState) -> None:
        self.state = state

    def request_id(self, chat: bool) -> str:
        raise NotImplementedError

    def fingerprint(self) -> str:
        return ""

    def error(self, status: int, message: str, err_type: str, param: str | None = None) -> web.Response:
        raise NotImplementedError

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
