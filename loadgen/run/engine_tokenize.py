"""`--tokenizer engine`: count a dataset's texts with the engine's own `/tokenize` (vLLM's; the
simulated engine serves one too) before the first request, so the lengths recorded are the engine's.

POST {base}/tokenize `{"model", "prompt": text, "add_special_tokens": false}` -> `{"tokens": [...]}`
(or `{"count": n}`), as `vllm bench serve` asks it; a few requests at a time.
"""

from __future__ import annotations

import asyncio
from typing import Any

from loadgen.config import ConfigError
from loadgen.transport.plainhttp import HttpSession, client_errors

PARALLEL = 8  # /tokenize requests in flight while counting


async def _count(session: HttpSession, url: str, model: str, text: str) -> int:
    body = {"model": model, "prompt": text, "add_special_tokens": False}
    async with session.post(url, json=body) as resp:
        if resp.status != 200:
            raise ConfigError(
                f"--tokenizer engine: {url} answered HTTP {resp.status}; pass --tokenizer DIR instead"
            )
        data = await resp.json(content_type=None)
    if isinstance(data, dict) and isinstance(data.get("count"), int):
        return int(data["count"])
    if isinstance(data, dict) and isinstance(data.get("tokens"), list):
        return len(data["tokens"])
    raise ConfigError(f"--tokenizer engine: {url} answered no 'tokens' or 'count'")


async def count_texts(session: HttpSession, base_url: str, model: str, texts: list[str]) -> dict[str, int]:
    """Each text's token count from the engine (one-line ConfigError when it cannot count)."""
    url, slots = f"{base_url}/tokenize", asyncio.Semaphore(PARALLEL)

    async def one(text: str) -> tuple[str, int]:
        async with slots:
            return text, await _count(session, url, model, text)

    try:
        return dict(await asyncio.gather(*(one(t) for t in texts)))
    except client_errors() as exc:
        raise ConfigError(
            f"--tokenizer engine: {url} failed ({type(exc).__name__}); pass --tokenizer DIR"
        ) from None


async def measure_on_engine(workload: Any, session: HttpSession, base_url: str, model: str) -> None:
    """Give the workload the engine's counts of the texts it asks about (nothing when it asks none)."""
    texts: list[str] = workload.texts_to_measure() if hasattr(workload, "texts_to_measure") else []
    if texts:
        workload.use_counts(await count_texts(session, base_url, model, texts))
