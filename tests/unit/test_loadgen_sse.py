"""SSE parsing against the real engines' bytes (golden captures) and malformed streams."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loadgen.sse import ProtocolError, parse_stream, split_events
from tests.conftest import GOLDEN_SGLANG, GOLDEN_VLLM
from tests.loadgen_servers import golden_body

CAPTURES = [
    d / f"sse_{n}.txt"
    for d in (GOLDEN_VLLM, GOLDEN_SGLANG)
    for n in ("completions", "chat", "completions_ignore_eos", "completions_continuous_usage")
]


def _reads(path: Path) -> list[tuple[int, bytes]]:
    body, timing = golden_body(path)
    reads, pos = [], 0
    for t_ns, n in timing:
        reads.append((t_ns, body[pos : pos + n]))
        pos += n
    return reads


def _usage(path: Path) -> dict[str, int]:
    body, _ = golden_body(path)
    for line in body.decode().splitlines():
        if line.startswith("data: {") and '"usage":{' in line:
            usage = json.loads(line[6:])["usage"]
    return usage


def _non_empty_chunks(path: Path) -> int:
    body, _ = golden_body(path)
    count = 0
    for line in body.decode().splitlines():
        if line.startswith("data: {"):
            choices = json.loads(line[6:])["choices"]
            count += any(c.get("text") or (c.get("delta") or {}).get("content") for c in choices)
    return count


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_golden_streams_count_one_token_chunk_per_completion_token(path: Path) -> None:
    parsed = parse_stream(_reads(path))
    assert parsed.done
    assert parsed.completion_tokens == _usage(path)["completion_tokens"]
    # token-bearing = non-empty text/content, as `vllm bench serve` counts them; the engines sometimes
    # stream a token as an empty string (detokenizer holding back partial UTF-8), so usage is the count
    assert len(parsed.token_ns) == _non_empty_chunks(path)
    assert parsed.completion_tokens - 3 <= len(parsed.token_ns) <= parsed.completion_tokens
    assert parsed.token_ns == sorted(parsed.token_ns)


def test_sglang_role_chunk_is_not_a_token() -> None:
    reads = _reads(GOLDEN_SGLANG / "sse_chat.txt")
    parsed = parse_stream(reads)
    # the first read carries the role-only chunk (empty content); the first token arrives later
    assert parsed.token_ns[0] > reads[0][0]


def test_n2_stream_counts_chunks_with_any_choice() -> None:
    parsed = parse_stream(_reads(GOLDEN_VLLM / "sse_completions_n2_logprobs.txt"))
    assert parsed.done
    assert len(parsed.token_ns) >= parsed.completion_tokens // 2  # type: ignore[operator]


def test_event_split_across_reads_takes_the_completing_read_time() -> None:
    reads = [(10, b'data: {"choices":[{"text":"a"'), (20, b"}]}\n"), (30, b"\ndata: [DONE]\n\n")]
    assert split_events(reads) == [(30, b'data: {"choices":[{"text":"a"}]}'), (30, b"data: [DONE]")]
    parsed = parse_stream(reads)
    assert parsed.token_ns == [30]
    assert parsed.completion_tokens is None


def test_crlf_framing_and_comments() -> None:
    reads = [(1, b': ping\r\n\r\ndata: {"choices":[{"delta":{"content":"x"}}]}\r\n\r\ndata: [DONE]\r\n\r\n')]
    parsed = parse_stream(reads)
    assert parsed.token_ns == [1]
    assert parsed.done


@pytest.mark.parametrize(
    "raw",
    [b"data: {not json\n\n", b"data: [1,2]\n\n", b"garbage line\n\n", b"data: [DONE]\n\ndata: {}\n\n"],
)
def test_malformed_streams_raise(raw: bytes) -> None:
    with pytest.raises(ProtocolError):
        parse_stream([(1, raw)])


def test_error_event_is_reported() -> None:
    parsed = parse_stream([(1, b'data: {"error": {"message": "boom", "code": 500}}\n\ndata: [DONE]\n\n')])
    assert parsed.error == "boom"
