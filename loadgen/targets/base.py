"""What every target shares: the OpenAI request shape, the flush result and small HTTP helpers
(`EngineMetadata`, a plain record, lives in loadgen/records.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, ClassVar

from loadgen.records import EngineMetadata
from loadgen.transport.plainhttp import HttpSession, client_errors
from loadgen.workload.generator import RequestSpec

META_TIMEOUT = 5.0  # s, whole request


@dataclass(frozen=True)
class FlushResult:
    """Outcome of a prefix-cache flush request."""

    ok: bool
    method: str
    detail: str


async def get_json(session: HttpSession, url: str) -> Any | None:
    """GET a JSON body; None on any error or non-200 answer (metadata is best effort)."""
    try:
        async with session.get(url, timeout=META_TIMEOUT) as resp:
            if resp.status != 200:
                return None
            return json.loads(await resp.read())
    except client_errors(TimeoutError, ValueError):
        return None


async def get_text(session: HttpSession, url: str) -> str | None:
    """GET a text body (a /metrics page); None on any error or non-200 answer."""
    try:
        async with session.get(url, timeout=META_TIMEOUT) as resp:
            return (await resp.read()).decode(errors="replace") if resp.status == 200 else None
    except client_errors(TimeoutError):
        return None


async def post_status(session: HttpSession, url: str) -> tuple[int | None, str]:
    """POST with an empty body; (status, first 200 chars of the body) or (None, error)."""
    try:
        async with session.post(url, timeout=META_TIMEOUT) as resp:
            return resp.status, (await resp.text()).strip()[:200]
    except client_errors(TimeoutError) as exc:
        return None, f"{type(exc).__name__}: {exc}"


def models_info(body: Any) -> tuple[list[str], int | None]:
    """(model ids, max_model_len of the first) from a /v1/models body."""
    data = body.get("data", []) if isinstance(body, dict) else []
    ids = [str(m.get("id")) for m in data if isinstance(m, dict) and m.get("id")]
    max_len = data[0].get("max_model_len") if data and isinstance(data[0], dict) else None
    return ids, int(max_len) if isinstance(max_len, int) else None


class Target:
    """An OpenAI-compatible server. Subclasses change the defaults, metadata and cache flush."""

    name: ClassVar[str] = "openai"
    engine: ClassVar[str] = "openai"
    default_base_url: ClassVar[str | None] = None
    supports_ignore_eos: ClassVar[bool] = False
    hint: ClassVar[str] = "is the server running at --base-url?"

    def build_payload(
        self, spec: RequestSpec, *, model: str, endpoint: str, ignore_eos: bool
    ) -> tuple[str, dict[str, Any]]:
        """(path, JSON body) of a streaming request asking for usage in the stream."""
        body: dict[str, Any] = {
            "model": model,
            "stream": True,
            "stream_options": {"include_usage": True},
            "max_tokens": spec.output_len,
            "temperature": 0.0,
        }
        if ignore_eos and self.supports_ignore_eos:
            body["ignore_eos"] = True
        if endpoint == "chat":
            body["messages"] = spec.messages or self._messages(spec)
            return "/v1/chat/completions", body
        prompt = spec.prompt
        if spec.system is not None and isinstance(prompt, str):
            prompt = f"{spec.system}\n\n{prompt}"
        body["prompt"] = prompt
        return "/v1/completions", body

    @staticmethod
    def _messages(spec: RequestSpec) -> list[dict[str, Any]]:
        text = spec.prompt if isinstance(spec.prompt, str) else " ".join(map(str, spec.prompt))
        messages = [{"role": "user", "content": text}]
        if spec.system is not None:
            messages.insert(0, {"role": "system", "content": spec.system})
        return messages

    async def fetch_metadata(self, session: HttpSession, base_url: str) -> EngineMetadata:
        """Model list from /v1/models (the only endpoint every OpenAI-compatible server has)."""
        ids, max_len = models_info(await get_json(session, f"{base_url}/v1/models"))
        return EngineMetadata(self.engine, None, ids[0] if ids else None, max_len, {}, ids, ["/v1/models"])

    async def flush_cache(self, session: HttpSession, base_url: str) -> FlushResult:
        """Generic OpenAI servers have no prefix-cache flush."""
        return FlushResult(False, "none", f"target {self.name!r} has no prefix-cache flush endpoint")
