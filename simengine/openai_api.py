"""`POST /v1/completions` and `/v1/chat/completions`: parse, validate, queue, stream back."""

from __future__ import annotations

import asyncio
import hmac
import random
import time
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from simengine.groundtruth import SendStamps
from simengine.personalities.base import Personality, json_response
from simengine.request import RequestGroup, Sequence
from simengine.sinks import CollectSink, StreamSink, output_text
from simengine.sse import ChunkWriter
from simengine.state import STATE, AppState
from simengine.tokens import chat_to_text, prompt_to_ids, tokenize_text

perf_ns = time.perf_counter_ns


class BadRequest(ValueError):
    """A 400 with the OpenAI error body; `param` names the offending field."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


@dataclass(frozen=True)
class ParsedRequest:
    prompts: list[list[int]]
    max_tokens: int | None
    min_tokens: int
    ignore_eos: bool
    stream: bool
    include_usage: bool
    continuous_usage: bool
    seed: int | None


def _int_field(body: dict[str, Any], name: str, lo: int) -> int | None:
    value = body.get(name)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < lo:
        raise BadRequest(f"{name} must be an integer >= {lo}, got {value!r}.", name)
    return value


def parse_request(body: Any, chat: bool) -> ParsedRequest:
    """Validate an OpenAI request body; raises BadRequest naming the bad field."""
    if not isinstance(body, dict):
        raise BadRequest("The request body must be a JSON object.")
    n = body.get("n", 1)
    if n != 1:
        raise BadRequest(f"n={n!r} is not supported by the simulated engine; only n=1.", "n")
    if chat:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise BadRequest("'messages' must be a non-empty list.", "messages")
        try:
            prompts = [tokenize_text(chat_to_text(messages))]
        except ValueError as exc:
            raise BadRequest(str(exc), "messages") from exc
        max_tokens = _int_field(body, "max_completion_tokens", 1)
        if max_tokens is None:
            max_tokens = _int_field(body, "max_tokens", 1)
    else:
        try:
            prompts = prompt_to_ids(body.get("prompt"))
        except ValueError as exc:
            raise BadRequest(str(exc), "prompt") from exc
        max_tokens = _int_field(body, "max_tokens", 1)
        max_tokens = 16 if max_tokens is None and "max_tokens" not in body else max_tokens
    min_tokens = _int_field(body, "min_tokens", 0) or 0
    if max_tokens is not None and min_tokens > max_tokens:
        raise BadRequest(f"min_tokens ({min_tokens}) must be <= max_tokens ({max_tokens}).", "min_tokens")
    opts = body.get("stream_options") or {}
    if not isinstance(opts, dict):
        raise BadRequest("'stream_options' must be an object.", "stream_options")
    seed = body.get("seed")
    return ParsedRequest(
        prompts,
        max_tokens,
        min_tokens,
        bool(body.get("ignore_eos", False)),
        bool(body.get("stream", False)),
        bool(opts.get("include_usage", False)),
        bool(opts.get("continuous_usage_stats", False)),
        seed if isinstance(seed, int) else None,
    )


def _target_len(state: AppState, req: ParsedRequest, max_tokens: int, rng: random.Random) -> int:
    """Output length: max_tokens with ignore_eos, else a seeded exponential draw clipped to the limits."""
    if req.ignore_eos:
        return max_tokens
    drawn = 1 + int(rng.expovariate(1.0 / state.cfg.eos_mean_tokens))
    return min(max_tokens, max(req.min_tokens, drawn, 1))


def build_group(
    state: AppState,
    p: Personality,
    req: ParsedRequest,
    chat: bool,
    x_request_id: str | None,
    arrival_ns: int,
    arrival_wall_ns: int,
) -> RequestGroup:
    """The RequestGroup for a validated request (raises BadRequest on context-length overflow)."""
    state.request_count += 1
    seed = req.seed if req.seed is not None else state.cfg.seed * 1_000_003 + state.request_count
    rng = random.Random(seed)
    params = {"stream": req.stream}
    group = RequestGroup(p.request_id(chat), x_request_id, arrival_ns, arrival_wall_ns, params)
    for index, ids in enumerate(req.prompts):
        check = p.check_length(len(ids), req.max_tokens, chat)
        if check.error:
            raise BadRequest(check.error, check.param)
        target = _target_len(state, req, check.max_tokens, rng)
        group.seqs.append(Sequence(group, index, ids, check.max_tokens, target, rng.randrange(1 << 30)))
    group.max_tokens_param = req.max_tokens or group.seqs[0].max_tokens
    return group


def add_openai_routes(app: web.Application, p: Personality) -> None:
    """Register the OpenAI-compatible endpoints for personality `p`."""

    async def completions(request: web.Request) -> web.StreamResponse:
        return await serve(request, p, chat=False)

    async def chat_completions(request: web.Request) -> web.StreamResponse:
        return await serve(request, p, chat=True)

    app.router.add_post("/v1/completions", completions)
    app.router.add_post("/v1/chat/completions", chat_completions)


def authorized(request: web.Request, state: AppState) -> bool:
    """No key configured, or the bearer token is one of the keys (compared in constant time)."""
    keys = state.cfg.api_key
    given = request.headers.get("Authorization", "").encode()
    return keys is None or any([hmac.compare_digest(given, f"Bearer {key}".encode()) for key in keys])


async def serve(request: web.Request, p: Personality, *, chat: bool) -> web.StreamResponse:
    """Validate, queue and answer one completion request."""
    arrival_ns, arrival_wall_ns = perf_ns(), time.time_ns()
    state = request.app[STATE]
    try:
        body = await request.json()
    except ValueError:
        return p.error(400, "Invalid JSON in the request body.", "BadRequestError")
    if isinstance(body, dict) and body.get("model") not in (
        None,
        state.cfg.served_model_name,
        state.cfg.model,
    ):
        refusal = p.unknown_model(str(body.get("model")))
        if refusal is not None:
            return refusal
    try:
        req = parse_request(body, chat)
        group = build_group(
            state, p, req, chat, request.headers.get("X-Request-Id"), arrival_ns, arrival_wall_ns
        )
    except BadRequest as exc:
        return p.error(400, str(exc), "BadRequestError", exc.param)
    requested = body.get("model") if isinstance(body.get("model"), str) else None
    group.params["model"] = p.response_model(requested)
    faults = state.faults.draw(group.seqs[0].target_len)
    if faults.error:
        return p.error(500, "Simulated internal error (--fault-error-rate).", "InternalServerError")
    if req.stream:
        return await _stream(request, state, p, group, req, chat, faults)
    return await _respond_json(request, state, p, group, chat)


async def _wait(state: AppState, group: RequestGroup, done: asyncio.Future[None]) -> None:
    state.engine.submit(group)
    try:
        await done
    except asyncio.CancelledError:
        state.engine.abort(group)
        raise


async def _stream(
    request: web.Request,
    state: AppState,
    p: Personality,
    group: RequestGroup,
    req: ParsedRequest,
    chat: bool,
    faults: Any,
) -> web.StreamResponse:
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream; charset=utf-8"})
    resp.enable_chunked_encoding()
    await resp.prepare(request)
    transport = request.transport
    assert transport is not None
    style = p.chat_style if chat else p.completion_style
    writer = ChunkWriter(
        style,
        group.request_id,
        int(time.time()),
        group.params["model"],
        p.fingerprint(),
        req.continuous_usage,
    )
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    stamps = state.ground_truth.new_stamps() if state.ground_truth else None
    sink = StreamSink(
        transport,
        writer,
        include_usage=req.include_usage,
        continuous_usage=req.continuous_usage,
        done=done,
        stamps=stamps,
        single=len(group.seqs) == 1,
        on_disconnect=state.engine.abort,
        faults=faults,
        stall_s=state.cfg.fault_stall_ms / 1e3,
        cached_tokens=p.reported_cached_tokens,
    )
    group.sink = sink
    await _wait(state, group, done)
    if not sink.closed and not transport.is_closing():
        await resp.write_eof()
    if stamps is not None:
        _record_truth(state, group, stamps)
    return resp


async def _respond_json(
    request: web.Request, state: AppState, p: Personality, group: RequestGroup, chat: bool
) -> web.StreamResponse:
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    group.sink = CollectSink(done)
    await _wait(state, group, done)
    if group.aborted:
        return p.error(500, "The request was aborted.", "InternalServerError")
    texts = [output_text(seq) for seq in group.seqs]
    resp = json_response(p.completion_body(group, chat, int(time.time()), texts))
    await resp.prepare(request)
    await resp.write_eof()
    if state.ground_truth is not None:
        stamps = state.ground_truth.new_stamps()
        stamps.stamp(perf_ns(), time.time_ns(), group.completion_tokens)
        _record_truth(state, group, stamps)
    return resp


def _record_truth(state: AppState, group: RequestGroup, stamps: SendStamps) -> None:
    gt = state.ground_truth
    if gt is None:
        return
    gt.write(
        request_id=group.request_id,
        x_request_id=group.x_request_id,
        arrival_ns=group.arrival_ns,
        arrival_wall_ns=group.arrival_wall_ns,
        prompt_tokens=group.prompt_tokens,
        stamps=stamps,
        outcome="aborted" if group.aborted else "ok",
    )
