"""SGLang: `/get_server_info` (all server args + version; `/server_info` in newer releases),
`/get_model_info`, prefix-cache flush with `POST /flush_cache`. SGLang 0.5.14 answers `/version` 404."""

from __future__ import annotations

from typing import Any

import aiohttp

from loadgen.targets.base import EngineMetadata, FlushResult, Target, get_json, models_info, post_status

SERVER_INFO_PATHS = ("/get_server_info", "/server_info")
MODEL_INFO_PATHS = ("/get_model_info", "/model_info")


async def _first_json(
    session: aiohttp.ClientSession, base_url: str, paths: tuple[str, ...]
) -> tuple[Any, str]:
    for path in paths:
        body = await get_json(session, f"{base_url}{path}")
        if isinstance(body, dict):
            return body, path
    return None, ""


class SGLangTarget(Target):
    """SGLang's server on its default port 30000."""

    name = "sglang"
    engine = "sglang"
    default_base_url = "http://127.0.0.1:30000"
    supports_ignore_eos = True
    hint = "is SGLang running? try --target sim"

    async def fetch_metadata(self, session: aiohttp.ClientSession, base_url: str) -> EngineMetadata:
        """Version and server args from the server info, model facts from the model info."""
        info, info_path = await _first_json(session, base_url, SERVER_INFO_PATHS)
        model_info, model_path = await _first_json(session, base_url, MODEL_INFO_PATHS)
        ids, max_len = models_info(await get_json(session, f"{base_url}/v1/models"))
        args: dict[str, Any] = dict(info) if info else {}
        if model_info:
            args["model_info"] = model_info
        context = args.get("context_length")
        return EngineMetadata(
            engine=self.engine,
            version=str(args["version"]) if args.get("version") else None,
            model=ids[0] if ids else args.get("served_model_name"),
            max_model_len=max_len or (int(context) if isinstance(context, int) else None),
            server_args=args,
            models=ids,
            sources=[p for p in (info_path, model_path) if p] + ["/v1/models"],
        )

    async def flush_cache(self, session: aiohttp.ClientSession, base_url: str) -> FlushResult:
        """POST /flush_cache (refused while requests are running)."""
        status, detail = await post_status(session, f"{base_url}/flush_cache")
        return FlushResult(status == 200, "POST /flush_cache", f"status {status}: {detail}")
