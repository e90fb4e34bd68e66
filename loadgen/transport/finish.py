"""What every load client shares once a response is in: its stamped reads parsed into token times,
counts and outcome (`finalize`), and the headers of a request. No HTTP client is imported here, so a
raw-client run never loads aiohttp (loadgen.transport.aiohttp_client re-exports these names).
"""

from __future__ import annotations

from array import array
from typing import Any

from loadgen.records import RequestRecord
from loadgen.transport.sse import ProtocolError, _sse, parse_stream

# finalize of the usual record (status 200, a marked stream) in C where `_sse` is built and
# LOADGEN_NATIVE is not 0 (sse.py's switch): the same fields, ~3x less CPU; it declines the rest
_native_finish = None if _sse is None else _sse.finish


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


def finalize(record: RequestRecord) -> RequestRecord:
    """Parse the stamped body (kept raw while the run is busy) into token times, counts and outcome."""
    if _native_finish is not None and _native_finish(record):
        return record
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
