"""The vLLM personality: vLLM's endpoints, bodies, errors and `/metrics` (shapes of vLLM 0.26.0)."""

from __future__ import annotations

import hashlib
import time
import uuid
from typing import Any

from aiohttp import web

from simengine.config import DEV_MODE_ENV, SimConfig
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
from simengine.personalities.vllm_metrics import VllmMetrics, uses_source_layout
from simengine.request import RequestGroup
from simengine.sse import VLLM_CHAT, VLLM_COMPLETION
from simengine.state import AppState
from simengine.tokenize_api import PieceBook, add_tokenize_routes

METRICS_CONTENT_TYPE = "text/plain; version=1.0.0; charset=utf-8"

# vllm:cache_config_info labels as vLLM 0.26.0 emits them (values we do not model keep vLLM's defaults)
CACHE_CONFIG_DEFAULTS = {
    "_block_size_resolved": "True",
    "block_size": "16",
    "cache_dtype": "auto",
    "calculate_kv_scales": "False",
    "enable_prefix_caching": "True",
    "gpu_memory_utilization": "0.9",
    "is_attention_free": "False",
    "kv_cache_dtype_skip_layers": "[]",
    "kv_cache_max_concurrency": "0",
    "kv_cache_memory_bytes": "None",
    "kv_cache_size_tokens": "0",
    "kv_offloading_backend": "native",
    "kv_offloading_size": "None",
    "kv_sharing_fast_prefill": "False",
    "mamba_block_size": "None",
    "mamba_cache_dtype": "auto",
    "mamba_cache_mode": "none",
    "mamba_page_size_padded": "None",
    "mamba_ssm_cache_dtype": "auto",
    "num_cpu_blocks": "None",
    "num_gpu_blocks": "0",
    "num_gpu_blocks_override": "None",
    "prefix_caching_hash_algo": "sha256",
    "prefix_match_unit": "None",
    "skip_page_size_padded": "None",
    "sliding_window": "None",
    "user_specified_block_size": "False",
    "user_specified_mamba_block_size": "False",
}


def vllm_server_args(cfg: SimConfig) -> dict[str, Any]:
    """The effective launch arguments under vLLM's own (`vllm serve`) names."""
    return {
        "model": cfg.model,
        "served_model_name": [cfg.served_model_name],
        "host": cfg.host,
        "port": cfg.port,
        "tensor_parallel_size": cfg.tensor_parallel_size,
        "max_num_seqs": cfg.max_num_seqs,
        "max_num_batched_tokens": cfg.max_num_batched_tokens,
        "max_model_len": cfg.max_model_len,
        "block_size": cfg.block_size,
        "gpu_memory_utilization": cfg.gpu_memory_utilization,
        "enable_chunked_prefill": cfg.enable_chunked_prefill,
        "enable_prefix_caching": cfg.enable_prefix_caching,
        "enable_prompt_tokens_details": cfg.enable_prompt_tokens_details,
        "dtype": "bfloat16" if cfg.dtype in ("bf16", "auto") else cfg.dtype,
        "kv_cache_dtype": "auto",
        "quantization": None,
        "seed": cfg.seed,
        "num_gpu_blocks_override": None,
        "api_key": cfg.effective_args()["api_key"],
    }


def _vllm_config_string(cfg: SimConfig) -> str:
    dtype = "torch.bfloat16" if cfg.dtype in ("bf16", "auto") else f"torch.{cfg.dtype}"
    return (
        f"model='{cfg.model}', speculative_config=None, tokenizer='{cfg.model}', skip_tokenizer_init=False, "
        f"tokenizer_mode=auto, revision=None, trust_remote_code=False, dtype={dtype}, "
        f"max_seq_len={cfg.max_model_len}, download_dir=None, load_format=auto, "
        f"tensor_parallel_size={cfg.tensor_parallel_size}, pipeline_parallel_size=1, data_parallel_size=1, "
        f"quantization=None, kv_cache_dtype=auto, device_config=cuda, seed={cfg.seed}, "
        f"served_model_name={cfg.served_model_name}, enable_prefix_caching={cfg.enable_prefix_caching}, "
        f"enable_chunked_prefill={cfg.enable_chunked_prefill}"
    )


DEV_MODE_PATHS = ("/server_info", "/reset_prefix_cache")  # vLLM registers these only in dev mode


class VllmPersonality(Personality):
    """vLLM: /version, /v1/models with max_model_len, vllm:* metrics; in dev mode (`VLLM_SERVER_DEV_MODE=1`)
    also /server_info and /reset_prefix_cache, which otherwise answer FastAPI's 404 as real vLLM does."""

    name = "vllm"
    owned_by = "vllm"
    completion_style = VLLM_COMPLETION
    chat_style = VLLM_CHAT

    @staticmethod
    def build_metrics(cfg: SimConfig) -> VllmMetrics:
        blocks = cfg.kv_cache_tokens // cfg.block_size
        info = dict(CACHE_CONFIG_DEFAULTS)
        info.update(
            {
                "block_size": str(cfg.block_size),
                "enable_prefix_caching": str(cfg.enable_prefix_caching),
                "gpu_memory_utilization": str(cfg.gpu_memory_utilization),
                "num_gpu_blocks": str(blocks),
                "kv_cache_size_tokens": str(blocks * cfg.block_size),
                "kv_cache_max_concurrency": str(blocks * cfg.block_size / cfg.max_model_len),
            }
        )
        return VllmMetrics(
            cfg.served_model_name, cfg.max_model_len, info, source=uses_source_layout(cfg.engine_version)
        )

    def __init__(self, state: AppState) -> None:
        super().__init__(state)
        digest = hashlib.sha256(repr(sorted(state.cfg.effective_args().items())).encode()).hexdigest()[:8]
        self._fingerprint = f"vllm-{state.cfg.engine_version}-{digest}"

    def request_id(self, chat: bool) -> str:
        return ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex[:16]

    def fingerprint(self) -> str:
        return self._fingerprint

    def error(self, status: int, message: str, err_type: str, param: str | None = None) -> web.Response:
        return json_response(
            {"error": {"message": message, "type": err_type, "param": param, "code": status}}, status
        )

    def reported_cached_tokens(self, group: RequestGroup) -> int | None:
        """With --enable-prompt-tokens-details, the prefix-cache hits (whole blocks, at the first
        scheduling) of the request's last prompt, 0 included: vLLM reports `num_cached_tokens` of its
        last output (`completion/serving.py`); without the flag, no details."""
        if not self.state.cfg.enable_prompt_tokens_details:
            return None
        return group.seqs[-1].cached_tokens

    def unknown_model(self, model: str) -> web.Response | None:
        return self.error(404, f"The model `{model}` does not exist.", "NotFoundError", "model")

    def check_length(self, prompt_len: int, max_tokens: int | None, chat: bool) -> LengthCheck:
        limit = self.state.cfg.max_model_len
        if max_tokens is None:
            if prompt_len >= limit:
                return LengthCheck(
                    error=(
                        f"This model's maximum context length is {limit} tokens. However, your request has "
                        f"{prompt_len} input tokens. Please reduce the length of the input messages. "
                        f"(parameter=input_tokens, value={prompt_len})"
                    ),
                    param="input_tokens",
                )
            return LengthCheck(max_tokens=limit - prompt_len)
        if prompt_len + max_tokens > limit:
            return LengthCheck(
                error=(
                    f"This model's maximum context length is {limit} tokens. However, you requested "
                    f"{max_tokens} output tokens and your prompt contains at least {prompt_len} input "
                    f"tokens, for a total of at least {prompt_len + max_tokens} tokens. Please reduce the "
                    "length of the input prompt or the number of requested output tokens. "
                    f"(parameter=input_tokens, value={prompt_len})"
                ),
                param="input_tokens",
            )
        return LengthCheck(max_tokens=max_tokens)

    def completion_body(
        self, group: RequestGroup, chat: bool, created: int, texts: list[str]
    ) -> dict[str, Any]:
        choices = build_choices(
            group,
            chat,
            texts,
            message_extra={
                "refusal": None,
                "annotations": None,
                "audio": None,
                "function_call": None,
                "reasoning": None,
            },
            chat_extra={"stop_reason": None, "token_ids": None, "routed_experts": None},
            text_extra={
                "stop_reason": None,
                "token_ids": None,
                "prompt_logprobs": None,
                "prompt_token_ids": None,
                "routed_experts": None,
            },
        )
        body: dict[str, Any] = {
            "id": group.request_id,
            "object": "chat.completion" if chat else "text_completion",
            "created": created,
            "model": self.state.cfg.served_model_name,
            "choices": choices,
            "service_tier": None,
            "system_fingerprint": self._fingerprint,
            "usage": usage_body(group, self.reported_cached_tokens(group)),
        }
        if chat:
            body.update({"prompt_logprobs": None, "prompt_token_ids": None, "prompt_text": None})
        body.update({"kv_transfer_params": None, "ec_transfer_params": None, "metrics": None})
        return body

    def models_body(self) -> dict[str, Any]:
        cfg = self.state.cfg
        now = int(time.time())
        perm = {
            "id": "modelperm-" + uuid.uuid4().hex[:16],
            "object": "model_permission",
            "created": now,
            "allow_create_engine": False,
            "allow_sampling": True,
            "allow_logprobs": True,
            "allow_search_indices": False,
            "allow_view": True,
            "allow_fine_tuning": False,
            "organization": "*",
            "group": None,
            "is_blocking": False,
        }
        return {
            "object": "list",
            "data": [
                {
                    "id": cfg.served_model_name,
                    "object": "model",
                    "created": now,
                    "owned_by": "vllm",
                    "root": cfg.model,
                    "parent": None,
                    "max_model_len": cfg.max_model_len,
                    "permission": [perm],
                }
            ],
        }

    def add_routes(self, app: web.Application) -> None:
        state = self.state

        async def version(request: web.Request) -> web.Response:
            return json_response({"version": state.cfg.engine_version})

        async def models(request: web.Request) -> web.Response:
            return json_response(self.models_body())

        async def load(request: web.Request) -> web.Response:
            return json_response({"server_load": state.engine.in_flight})

        async def server_info(request: web.Request) -> web.Response:
            return json_response(
                {
                    "vllm_config": _vllm_config_string(state.cfg),
                    "vllm_env": {DEV_MODE_ENV: True},
                    "system_env": {
                        "vllm_version": state.cfg.engine_version,
                        "simulated": True,
                        "gpu": state.cfg.gpu,
                    },
                    "server_args": vllm_server_args(state.cfg),
                    **simulator_facts(state.cfg),
                }
            )

        async def reset_prefix_cache(request: web.Request) -> web.Response:
            state.engine.scheduler.kv.reset_prefix_cache()
            return web.Response(status=200)

        async def metrics(request: web.Request) -> web.Response:
            return metrics_response(state, METRICS_CONTENT_TYPE)

        r = app.router
        for path in ("/health", "/ping"):
            r.add_get(path, empty_ok)
        r.add_post("/ping", empty_ok)
        r.add_get("/version", version)
        r.add_get("/v1/models", models)
        r.add_get("/load", load)
        r.add_get("/metrics", metrics)
        add_tokenize_routes(app, self, PieceBook())
        if state.cfg.dev_mode:
            r.add_get("/server_info", server_info)
            r.add_post("/reset_prefix_cache", reset_prefix_cache)
        else:
            for path in DEV_MODE_PATHS:
                r.add_route("*", path, not_found)
