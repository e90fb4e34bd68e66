"""The streaming HTTP client: sends one request and stamps every read as its bytes arrive.

It only records timestamps (`time.perf_counter_ns()`, taken when a read returns, before any
parsing); `sse.parse_stream` turns the stamped reads into token times afterwards, and `stats`
computes the metrics. Failures are outcomes, never exceptions: `ok`, `http_error`, `timeout`,
`connect_error` (no connection could be opened: refused, unreachable, name not resolved),
`disconnect` (the connection broke after it was opened), `protocol_error`, `cancelled` (loadgen
stopped it itself; recorded and re-raised).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from array import array
from typing import Any

import aiohttp
from aiohttp.http_exceptions import HttpProcessingError

from loadgen.records import RequestRecord, mark_cut_short
from loadgen.transport.sse import ProtocolError, parse_stream
from loadgen.transport.stamping import Reads, read_stamped


def _finish_from_stream(record: RequestRecord, reads: list[tuple[int, bytes]], complete: bool) -> None:
    """Fill token times and counts from the stamped reads; set protocol_error when malformed."""
    try:
        parsed = parse_stream(reads)
    except ProtocolError as exc:
        record.outcome, record.error = "protocol_error", str(exc)
        return
    record.token_ns = array("q", parsed.token_ns)  # 8 bytes a token: long runs stay small
    if parsed.token_ns:
        record.first_ns, record.last_ns = parsed.token_ns[0], parsed.token_ns[-1]
    record.prompt_tokens = parsed.prompt_tokens
    record.cached_tokens = parsed.cached_tokens
    if parsed.completion_tokens is not None:
        record.output_tokens, record.token_count = parsed.completion_tokens, "usage"
    else:
        record.output_tokens, record.token_count = len(parsed.token_ns), "estimated"
    if not complete:
        return
    if parsed.error is not None:
        record.outcome, record.error = "http_error", parsed.error
    elif not parsed.done:
        record.outcome, record.error = "protocol_error", "stream ended before data: [DONE]"
    elif not parsed.token_ns:
        record.outcome, record.error = "protocol_error", "stream carried no tokens"
    else:
        record.outcome = "ok"


async def _read_error(resp: aiohttp.ClientResponse) -> str:
    """`HTTP <status>: <body start>` of a failed request."""
    reads: list[tuple[int, bytes]] = []
    with contextlib.suppress(aiohttp.ClientError):
        await read_stamped(resp.content, reads)
    body = b"".join(data for _, data in reads).decode(errors="replace")
    return f"HTTP {resp.status}: {body.strip()[:300]}"


async def send_request(
    session: aiohttp.ClientSession, url: str, body: bytes, headers: dict[str, str], record: RequestRecord
) -> RequestRecord:
    """POST `body` (JSON bytes) and record the stamped response; `finalize(record)` parses it later."""
    reads = Reads()
    now = time.perf_counter_ns
    record.sent_ns = now()
    try:
        async with session.post(url, data=body, headers=headers) as resp:
            record.http_status = resp.status
            if resp.status != 200:
                record.outcome, record.error = "http_error", await _read_error(resp)
                return record
            await read_stamped(resp.content, reads)
        record.done_ns = now()
        record.raw = reads
    except asyncio.CancelledError:
        mark_cut_short(record, reads, "cancelled", "cancelled before completion")
        raise
    except TimeoutError:
        mark_cut_short(record, reads, "timeout", "no complete response within --request-timeout")
    except aiohttp.ClientConnectorError as exc:  # before ClientOSError, its base: refused, unreachable
        mark_cut_short(record, reads, "connect_error", f"{type(exc).__name__}: {str(exc)[:200]}")
    except aiohttp.ClientPayloadError as exc:  # a body cut short, or one whose framing is broken
        mark_cut_short(record, reads, payload_outcome(exc), _one_line(exc))
    except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError, aiohttp.ClientConnectionError) as exc:
        mark_cut_short(record, reads, "disconnect", _one_line(exc))
    except (aiohttp.ClientResponseError, HttpProcessingError) as exc:  # bytes that are not HTTP
        mark_cut_short(record, reads, "protocol_error", _one_line(exc))
    except Exception as exc:  # noqa: BLE001 - every failure is an outcome (a bug of ours says its type)
        mark_cut_short(record, reads, "protocol_error", f"unexpected {_one_line(exc)}")
    return record


def _one_line(exc: BaseException) -> str:
    """`Type: message` on one line, at most about 200 characters."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:200]}"


def payload_outcome(exc: aiohttp.ClientPayloadError) -> str:
    """`disconnect` when the body stopped before its end (the connection closed: aiohttp says the
    payload "is not completed" or not enough data came), `protocol_error` when its framing is broken."""
    text = f"{exc} {exc.__cause__ or ''}".lower()
    return "disconnect" if "not completed" in text or "not enough data" in text else "protocol_error"


def finalize(record: RequestRecord) -> RequestRecord:
    """Parse the stamped body (kept raw while the run is busy) into token times, counts and outcome."""
    status = record.http_status
    if record.outcome is None and status is not None and status != 200:
        # an error status cut short (the stop, a timeout, a reset mid-body): its body is not a stream
        reads, record.raw = record.raw or [], None
        text = b"".join(data for _, data in reads).decode(errors="replace")
        record.outcome, record.error = "http_error", f"HTTP {status}: {text.strip()[:300]}"
        return record
    if record.raw is not None:
        reads, record.raw = record.raw, None
        _finish_from_stream(record, reads, complete=record.fallback is None)
    if record.outcome is None and record.fallback is not None:
        record.outcome, record.error = record.fallback
    return record


def request_headers(api_key: str | None, x_request_id: str) -> dict[str, str]:
    """Headers of one request: JSON body, uncompressed response (bodies are stamped and parsed as
    they arrive), X-Request-Id, and the bearer token when given."""
    headers = {
        "Content-Type": "application/json",
        "Accept-Encoding": "identity",
        "X-Request-Id": x_request_id,
    }
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    return headers


def describe_payload(payload: dict[str, Any]) -> dict[str, Any]:
    """A loggable view of a payload (prompt elided)."""
    return {k: ("…" if k in ("prompt", "messages") else v) for k, v in payload.items()}
