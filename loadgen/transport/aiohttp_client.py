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

import aiohttp
from aiohttp.http_exceptions import HttpProcessingError

from loadgen.records import RequestRecord, mark_cut_short
from loadgen.transport.finish import describe_payload, finalize, request_headers
from loadgen.transport.stamping import Reads, read_stamped

__all__ = ["describe_payload", "finalize", "payload_outcome", "request_headers", "send_request"]


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
