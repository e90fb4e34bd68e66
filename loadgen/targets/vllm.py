"""vLLM: `/version`, `/v1/models` (max_model_len), `/server_info` (VLLM_SERVER_DEV_MODE=1 only),
prefix-cache flush with `POST /reset_prefix_cache` (dev mode)."""

from __future__ import annotations

from typing import Any

import aiohttp

from loadgen.targets.base import EngineMetadata, FlushResult, Target, get_json, models_info, post_status


class VLLMTarget(Target):
    """vLLM's OpenAI server on its default port 8000."""

    name = "vllm"
    engine = "vllm"
    default_base_url = "http://127.0.0.1:8000"
    supports_ignore_eos = True
    hint = "is vLLM running? try --target sim"

    async def fetch_metadata(self, session: aiohttp.ClientSession, base_url: str) -> EngineMetadata:
        """Version, served models and (dev mode) the engine config."""
        version = await get_json(session, f"{base_url}/version")
        ids, max_len = models_info(await get_json(session, f"{base_url}/v1/models"))
        server_info = await get_json(session, f"{base_url}/server_info")
        sources = ["/version", "/v1/models"] + (["/server_info"] if server_info else [])
        return EngineMetadata(
            engine=self.engine,
            version=version.get("version") if isinstance(version, dict) else None,
            model=ids[0] if ids else None,
            max_model_len=max_len,
            server_args=_server_args(server_info),
            models=ids,
            sources=sources,
        )

    async def flush_cache(self, session: aiohttp.ClientSession, base_url: str) -> FlushResult:
        """POST /reset_prefix_cache (answers 404 unless VLLM_SERVER_DEV_MODE=1)."""
        status, detail = await post_status(session, f"{base_url}/reset_prefix_cache")
        ok = status == 200
        hint = "" if ok or status != 404 else " (vLLM needs VLLM_SERVER_DEV_MODE=1)"
        return FlushResult(ok, "POST /reset_prefix_cache", f"status {status}: {detail}{hint}")


def _server_args(body: Any) -> dict[str, Any]:
    """vLLM's /server_info body: keep it as given (its `vllm_config` is one long string)."""
    return dict(body) if isinstance(body, dict) else {}
