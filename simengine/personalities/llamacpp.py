"""The llama.cpp personality: `llama-server`'s endpoints, bodies, errors and `/metrics` (the shapes of
the real server in tests/fixtures/golden/llamacpp-b1-0c1e570).

What it keeps of the real server: `/health` (`{"status":"ok"}`), `/props` (`total_slots` = the
simulator's max_num_seqs, the per-slot context, `build_info` as its version), `/slots`,
`/v1/models` (`owned_by: llamacpp`, with its `models` list), usage with
`prompt_tokens_details.cached_tokens` on every response, context errors as
`exceed_context_size_error`, and unlabelled `llamacpp:*` metrics. One difference, said in
docs/engines.md: on `/v1/completions` the real server puts the usage on the finish chunk, the
simulator sends it in a chunk of its own (as on chat), which clients read the same way.
"""

from __future__ import annotations

import secrets
import string
from typing import Any

from aiohttp import web

from simengine.config import SimConfig
from simengine.personalities.base import (
    LengthCheck,
    Personality,
    build_choices,
    json_response,
    metrics_response,
    not_found,
)
from simengine.personalities.llamacpp_metrics import LlamacppMetrics
from simengine.request import RequestGroup
from simengine.sse import ChunkStyle

METRICS_CONTENT_TYPE = "text/plain; version=0.0.4"
_ID_CHARS = string.ascii_letters + string.digits
LLAMACPP_COMPLETION = ChunkStyle(
    b"text_completion",
    b',"text":',
    b"",
    b',"logprobs":null,"finish_reason":%s%s}]',
    "never",
    b"}\n\n",
    b',"usage":{"prompt_tokens":%d,"total_tokens":%d,"completion_tokens":%d}}\n\n',
    b'"usage":{"prompt_tokens":%d,"total_tokens":%d,"completion_tokens":%d%b}',
    b',"system_fingerprint":%s}\n\n',
    None,
    b',"text":"","logprobs":null,"finish_reason":%s}]}\n\n',
)
LLAMACPP_CHAT = ChunkStyle(
    b"chat.completion.chunk",
    b',"delta":{"content":',
    b"}",
    b',"finish_reason":%s%s}]',
    "never",
    b"}\n\n",
    LLAMACPP_COMPLETION.usage_fmt,
    LLAMACPP_COMPLETION.final_usage_fmt,
    LLAMACPP_COMPLETION.final_tail,
    b',"delta":{"role":"assistant","content":null},"finish_reason":null}]}\n\n',
    b',"delta":{},"finish_reason":%s}]}\n\n',
)


class LlamacppPersonality(Personality):
    """llama.cpp's llama-server: /health, /props, /slots, /v1/models, llamacpp:* metrics, no flush."""

    name = "llamacpp"
    owned_by = "llamacpp"
    completion_style = LLAMACPP_COMPLETION
    chat_style = LLAMACPP_CHAT

    @staticmethod
    def build_metrics(cfg: SimConfig) -> LlamacppMetrics:
        return LlamacppMetrics()

    def reported_cached_tokens(self, group: RequestGroup) -> int:
        """llama-server always reports `prompt_tokens_details.cached_tokens` (0 included), streamed too."""
        return sum(seq.cached_tokens for seq in group.seqs)

    def request_id(self, chat: bool) -> str:
        return "chatcmpl-" + "".join(secrets.choice(_ID_CHARS) for _ in range(32))

    def fingerprint(self) -> str:
        return self.state.cfg.engine_version

    def error(self, status: int, message: str, err_type: str, param: str | None = None) -> web.Response:
        kind = "exceed_context_size_error" if "context" in message else "invalid_request_error"
        return json_response({"error": {"code": status, "message": message, "type": kind}}, status)

    def check_length(self, prompt_len: int, max_tokens: int | None, chat: bool) -> LengthCheck:
        limit = self.slot_context()
        if prompt_len >= limit:
            return LengthCheck(
                error=f"request ({prompt_len} tokens) exceeds the available context size ({limit} tokens), "
                "try increasing it"
            )
        room = limit - prompt_len  # generation stops when the slot's context is full
        return LengthCheck(max_tokens=room if max_tokens is None else min(max_tokens, room))

    def slot_context(self) -> int:
        """Each slot's context: the simulator's max_model_len (as with llama-server's --kv-unified)."""
        return self.state.cfg.max_model_len

    def completion_body(
        self, group: RequestGroup, chat: bool, created: int, texts: list[str]
    ) -> dict[str, Any]:
        choices = build_choices(group, chat, texts, message_extra={}, chat_extra={}, text_extra={})
        cached = self.reported_cached_tokens(group)
        p, c = group.prompt_tokens, group.completion_tokens
        return {
            "choices": choices,
            "created": created,
            "model": self.state.cfg.served_model_name,
            "system_fingerprint": self.fingerprint(),
            "object": "chat.completion" if chat else "text_completion",
            "usage": {
                "completion_tokens": c,
                "prompt_tokens": p,
                "total_tokens": p + c,
                "prompt_tokens_details": {"cached_tokens": cached},
            },
            "id": group.request_id,
        }

    def props_body(self) -> dict[str, Any]:
        cfg = self.state.cfg
        return {
            "default_generation_settings": {"params": {"seed": cfg.seed}, "n_ctx": self.slot_context()},
            "total_slots": cfg.max_num_seqs,
            "model_alias": cfg.served_model_name,
            "model_path": cfg.model,
            "endpoint_slots": True,
            "endpoint_props": False,
            "endpoint_metrics": True,
            "build_info": cfg.engine_version,
            "is_sleeping": False,
            "simulated": True,
        }

    def slots_body(self) -> list[dict[str, Any]]:
        busy = len(self.state.engine.scheduler.running)
        n_ctx = self.slot_context()
        return [
            {"id": i, "n_ctx": n_ctx, "speculative": False, "is_processing": i < busy}
            for i in range(self.state.cfg.max_num_seqs)
        ]

    def models_body(self) -> dict[str, Any]:
        cfg = self.state.cfg
        name = cfg.served_model_name
        meta = {"n_ctx": self.slot_context(), "n_ctx_train": cfg.max_model_len}
        return {
            "models": [{"name": name, "model": name, "type": "model", "capabilities": ["completion"]}],
            "object": "list",
            "data": [
                {
                    "id": name,
                    "aliases": [name],
                    "tags": [],
                    "object": "model",
                    "created": int(self.state.started_wall),
                    "owned_by": "llamacpp",
                    "meta": meta,
                }
            ],
        }

    def add_routes(self, app: web.Application) -> None:
        async def health(request: web.Request) -> web.Response:
            return json_response({"status": "ok"})

        def static(fn: Any) -> Any:
            async def handler(request: web.Request) -> web.Response:
                return json_response(fn())

            return handler

        async def metrics(request: web.Request) -> web.Response:
            return metrics_response(self.state, METRICS_CONTENT_TYPE)

        r = app.router
        r.add_get("/health", health)
        r.add_get("/v1/health", health)
        r.add_get("/props", static(self.props_body))
        r.add_get("/slots", static(self.slots_body))
        r.add_get("/v1/models", static(self.models_body))
        r.add_get("/metrics", metrics)
        r.add_get("/version", not_found)  # llama-server has no /version
