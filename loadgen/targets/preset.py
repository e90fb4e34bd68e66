"""A target preset over the engine registry: default port, metadata endpoints and flush from the spec.

Every metadata endpoint a registered engine answers is asked once, and the engine is recognised
from the bodies' content (`infergauge.engines.detect_http`), so a preset pointed at another engine,
or the simulated engine in either personality, still reads the right fields.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any, ClassVar

from infergauge import engines
from infergauge.engines.base import EngineSpec
from infergauge.engines.resolve import info_metric_args
from loadgen.records import EngineMetadata
from loadgen.targets.base import FlushResult, Target, get_json, get_text, models_info, post_status
from loadgen.transport.plainhttp import HttpSession


def default_url(engine: str) -> str:
    """`http://127.0.0.1:<the engine's default port>`."""
    return f"http://127.0.0.1:{engines.get(engine).default_port}"


async def fetch_bodies(session: HttpSession, base_url: str) -> dict[str, Any]:
    """{path: JSON body or None} for every registered engine's metadata endpoints."""
    paths = engines.metadata_paths()
    bodies = await asyncio.gather(*(get_json(session, f"{base_url}{path}") for path in paths))
    return dict(zip(paths, bodies, strict=True))


def _first(bodies: dict[str, Any], paths: tuple[str, ...]) -> tuple[dict[str, Any], str]:
    for path in paths:
        if isinstance(bodies.get(path), dict) and bodies[path]:
            return dict(bodies[path]), path
    return {}, ""


def metadata_from_bodies(engine: str, bodies: dict[str, Any]) -> EngineMetadata:
    """Pure: the EngineMetadata a set of metadata bodies tells, labelled `engine`."""
    ids, max_len = models_info(bodies.get("/v1/models"))
    spoken = engines.detect_http(bodies)
    if spoken is None:
        answered = ["/v1/models"] if ids else []
        return EngineMetadata(engine, None, ids[0] if ids else None, max_len, {}, ids, answered)
    info, info_path = _first(bodies, spoken.server_info.paths)
    model_info, model_path = _first(bodies, spoken.model_info_paths)
    version_body = bodies.get(spoken.version_path or "")
    version = version_body.get("version") if isinstance(version_body, dict) else None
    key = spoken.server_info.version_key
    version = version or (info.get(key) if key else None)
    context = info.get("context_length")
    args = {**info, "model_info": model_info} if model_info else info
    return EngineMetadata(
        engine=engine,
        version=str(version) if version else None,
        model=ids[0] if ids else info.get("served_model_name"),
        max_model_len=max_len or (context if isinstance(context, int) else None),
        server_args=args,
        models=ids,
        sources=[path for path, body in bodies.items() if body is not None],
        speaks=spoken.name,
        server_info_path=info_path,
    )


async def flush_with(spec: EngineSpec, session: HttpSession, base_url: str) -> FlushResult:
    """POST the spec's prefix-cache flush endpoint (what it needs, e.g. dev mode, named on a 404)."""
    if spec.flush_path is None:
        return FlushResult(False, "none", f"engine {spec.name!r} has no prefix-cache flush endpoint")
    status, detail = await post_status(session, f"{base_url}{spec.flush_path}")
    ok = status == 200
    needs = f" ({spec.name} needs {spec.flush_needs})" if status == 404 and spec.flush_needs else ""
    return FlushResult(ok, f"POST {spec.flush_path}", f"status {status}: {detail}{needs}")


class EnginePreset(Target):
    """A registered engine's server: subclasses name the engine; the rest comes from its spec."""

    engine: ClassVar[str]

    async def fetch_metadata(self, session: HttpSession, base_url: str) -> EngineMetadata:
        """Version, models and server args from whichever engine's endpoints answer; a server that
        answers as another registered engine is recorded as that engine (`asked_engine` keeps the preset)."""
        meta = metadata_from_bodies(self.engine, await fetch_bodies(session, base_url))
        return await with_info_metric(session, base_url, answered_as(meta, self.engine))

    async def flush_cache(self, session: HttpSession, base_url: str) -> FlushResult:
        """The engine's own flush endpoint."""
        return await flush_with(engines.get(self.engine), session, base_url)


def answered_as(meta: EngineMetadata, preset: str) -> EngineMetadata:
    """`meta` labelled with the engine its bodies were recognised as, when that is not `preset`."""
    if meta.speaks is None or meta.speaks == preset:
        return meta
    return dataclasses.replace(meta, engine=meta.speaks, asked_engine=preset)


def mismatch_warning(meta: EngineMetadata, base_url: str) -> str | None:
    """The console line for a `--target` that is not the engine that answered (None when it is)."""
    if meta.asked_engine is None:
        return None
    version = f" {meta.version}" if meta.version else ""
    told = meta.server_info_path or (meta.sources[0] if meta.sources else "its endpoints")
    return (
        f"warning: --target {meta.asked_engine} but {base_url} answers as {meta.engine}{version} "
        f"(from {told}); recorded as engine {meta.engine}"
    )


async def with_info_metric(session: HttpSession, base_url: str, meta: EngineMetadata) -> EngineMetadata:
    """`meta` with the values the engine's info metric states on its /metrics (vLLM's effective
    `gpu_memory_utilization`, `block_size`, ... in `vllm:cache_config_info`), when it has one."""
    spec = engines.ENGINES.get(meta.speaks or "")
    if spec is None or spec.info_metric is None:
        return meta
    text = await get_text(session, f"{base_url}{spec.info_metric.path}")
    reported = info_metric_args(spec, text) if text else {}
    return dataclasses.replace(meta, reported=reported) if reported else meta
