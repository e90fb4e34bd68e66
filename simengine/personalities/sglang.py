"""The SGLang personality: SGLang's endpoints, bodies, errors and `/metrics` (shapes of SGLang 0.5.14)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Awaitable, Callable
from functools import cache
from importlib import resources
from typing import Any

from aiohttp import web

from simengine.config import SimConfig
from simengine.personalities.base import (
    LengthCheck,
    Personality,
    build_choices,
    empty_ok,
    json_response,
    metrics_response,
    not_found,
    simulator_facts,
    usage_body,
)
from simengine.personalities.sglang_metrics import SglangMetrics, uses_source_layout
from simengine.request import RequestGroup
from simengine.sse import SGLANG_CHAT, SGLANG_COMPLETION

METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
Handler = Callable[[web.Request], Awaitable[web.Response]]
FLUSH_OK = (
    "Cache flushed.\nPlease check backend logs for more details. (When there are running or waiting "
    "requests, the operation will not be performed.)\n"
)


@cache
def _server_args_template() -> dict[str, Any]:
    """Every server argument of SGLang 0.5.14 with its default (from the golden /get_server_info)."""
    text = resources.files("simengine").joinpath("data/sglang_server_args.json").read_text(encoding="utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def sglang_server_args(cfg: SimConfig) -> dict[str, Any]:
    """The effective launch arguments under SGLang's own names (`/get_server_info` body)."""
    args = dict(_server_args_template())
    args.update(
        {
            "model_path": cfg.model,
            "tokenizer_path": cfg.model,
            "served_model_name": cfg.served_model_name,
            "host": cfg.host,
            "port": cfg.port,
            "context_length": cfg.max_model_len,
            "mem_fraction_static": cfg.gpu_memory_utilization,
            "max_running_requests": cfg.max_num_seqs,
            "chunked_prefill_size": cfg.max_num_batched_tokens if cfg.enable_chunked_prefill else -1,
            "page_size": cfg.block_size,
            "tp_size": cfg.tensor_parallel_size,
            "disable_radix_cache": not cfg.enable_prefix_caching,
            "enable_cache_report": cfg.enable_prompt_tokens_details,
            "random_seed": cfg.seed,
            "dtype": "auto" if cfg.dtype in ("bf16", "auto") else cfg.dtype,
            "api_key": cfg.effective_args()["api_key"],
        }
    )
    return args


class SglangPersonality(Personality):
    """SGLang: /get_server_info, /get_model_info, /flush_cache (400 while busy), sglang:* metrics."""

    name = "sglang"
    owned_by = "sglang"
    completion_style = SGLANG_COMPLETION
    chat_style = SGLANG_CHAT

    @staticmethod
    def build_metrics(cfg: SimConfig) -> SglangMetrics:
        return SglangMetrics(
            cfg.served_model_name,
            cfg.max_model_len,
            cfg.block_size,
            cfg.kv_cache_tokens,
            source=uses_source_layout(cfg.engine_version),
        )

    def request_id(self, chat: bool) -> str:
        return uuid.uuid4().hex

    def reported_cached_tokens(self, group: RequestGroup) -> int | None:
        """With --enable-cache-report, the radix-cache hits summed over the request's prompts, and
        only when above 0 (`UsageProcessor._details_if_cached`); without the flag, no details."""
        if not self.state.cfg.enable_prompt_tokens_details:
            return None
        cached = sum(seq.cached_tokens for seq in group.seqs)
        return cached if cached > 0 else None

    def error(self, status: int, message: str, err_type: str, param: str | None = None) -> web.Response:
        return json_response(
            {"object": "error", "message": message, "type": err_type, "param": param, "code": status}, status
        )

    def response_model(self, requested: str | None) -> str:
        return requested or self.state.cfg.served_model_name

    def check_length(self, prompt_len: int, max_tokens: int | None, chat: bool) -> LengthCheck:
        limit = self.state.cfg.max_model_len
        if prompt_len >= limit:
            return LengthCheck(
                error=f"The input ({prompt_len} tokens) is longer than the model's context length "
                f"({limit} tokens)."
            )
        room = limit - prompt_len  # SGLang clips max_new_tokens to the context left
        return LengthCheck(max_tokens=room if max_tokens is None else min(max_tokens, room))

    def completion_body(
        self, group: RequestGroup, chat: bool, created: int, texts: list[str]
    ) -> dict[str, Any]:
        choices = build_choices(
            group,
            chat,
            texts,
            message_extra={"reasoning_content": None, "tool_calls": None},
            chat_extra={"matched_stop": None},
            text_extra={"matched_stop": None},
        )
        return {
            "id": group.request_id,
            "object": "chat.completion" if chat else "text_completion",
            "created": created,
            "model": group.params.get("model", self.state.cfg.served_model_name),
            "choices": choices,
            "usage": usage_body(group, self.reported_cached_tokens(group), reasoning_tokens=0),
            "metadata": {"weight_version": "default"},
        }

    def server_info(self) -> dict[str, Any]:
        cfg = self.state.cfg
        args = sglang_server_args(cfg)
        internal = {
            **args,
            "last_gen_throughput": 0.0,
            "memory_usage": {"kvcache": 0.0, "token_capacity": cfg.kv_cache_tokens},
            "effective_max_running_requests_per_dp": cfg.max_num_seqs,
        }
        return {
            **args,
            "max_total_num_tokens": cfg.kv_cache_tokens,
            "internal_states": [internal],
            "version": cfg.engine_version,
            **simulator_facts(cfg),
        }

    def model_info(self) -> dict[str, Any]:
        cfg = self.state.cfg
        return {
            "model_path": cfg.model,
            "tokenizer_path": cfg.model,
            "is_generation": True,
            "preferred_sampling_params": None,
            "weight_version": "default",
            "has_image_understanding": False,
            "has_audio_understanding": False,
            "model_type": "llama",
            "architectures": ["LlamaForCausalLM"],
        }

    def models_body(self) -> dict[str, Any]:
        cfg = self.state.cfg
        model = {
            "id": cfg.served_model_name,
            "object": "model",
            "created": int(self.state.started_wall),
            "owned_by": "sglang",
            "root": cfg.served_model_name,
            "parent": None,
            "max_model_len": cfg.max_model_len,
        }
        return {"object": "list", "data": [model]}

    def load_body(self) -> list[dict[str, Any]]:
        sched = self.state.engine.scheduler
        return [
            {
                "dp_rank": 0,
                "num_reqs": len(sched.running) + len(sched.waiting),
                "num_waiting_reqs": len(sched.waiting),
                "num_tokens": sched.kv.used_blocks * sched.block_size,
                "num_pending_tokens": 0,
                "ts_tic": time.monotonic(),
            }
        ]

    async def _flush_cache(self, request: web.Request) -> web.Response:
        """SGLang refuses (400) while requests run or wait, as the real `/flush_cache` does."""
        sched = self.state.engine.scheduler
        if sched.running or sched.waiting:
            return web.Response(status=400, text=FLUSH_OK)
        sched.kv.reset_prefix_cache()
        return web.Response(status=200, text=FLUSH_OK)

    async def _metrics(self, request: web.Request) -> web.Response:
        return metrics_response(self.state, METRICS_CONTENT_TYPE)

    def add_routes(self, app: web.Application) -> None:
        def static(fn: Callable[[], Any], status: int = 200) -> Handler:
            async def handler(request: web.Request) -> web.Response:
                return json_response(fn(), status)

            return handler

        r = app.router
        for path in ("/health", "/health_generate"):
            r.add_get(path, empty_ok)
        for path in ("/server_info", "/get_server_info"):
            r.add_get(path, static(self.server_info))
        for path in ("/model_info", "/get_model_info"):
            r.add_get(path, static(self.model_info))
        r.add_get("/v1/models", static(self.models_body))
        r.add_get("/get_load", static(self.load_body))
        r.add_get("/flush_cache", self._flush_cache)
        r.add_post("/flush_cache", self._flush_cache)
        r.add_get("/version", not_found)  # SGLang 0.5.14 has no /version
        r.add_get("/metrics", self._metrics)
