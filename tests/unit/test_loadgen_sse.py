"""SSE parsing against the real engines' bytes (golden captures) and malformed streams."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loadgen.transport.sse import ProtocolError, fast_events, parse_general, parse_stream, split_events
from tests.conftest import GOLDEN_SGLANG, GOLDEN_SSE_STREAMS, GOLDEN_VLLM
from tests.loadgen_servers import golden_body


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


def _chunks_with_choices(path: Path) -> int:
    body, _ = golden_body(path)
    return sum(
        1
        for line in body.decode().splitlines()
        if line.startswith("data: {") and json.loads(line[6:])["choices"]
    )


@pytest.mark.parametrize("path", GOLDEN_SSE_STREAMS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_golden_streams_count_one_token_chunk_per_completion_token(path: Path) -> None:
    parsed = parse_stream(_reads(path))
    assert parsed.done
    assert parsed.completion_tokens == _usage(path)["completion_tokens"]
    # token-bearing = a non-empty `choices` list (as `vllm bench serve`): one chunk per decode step,
    # even when the step's text is empty; chat adds a role chunk (SGLang) or a finish chunk
    assert len(parsed.token_ns) == _chunks_with_choices(path)
    assert abs(len(parsed.token_ns) - parsed.completion_tokens) <= 2
    assert parsed.token_ns == sorted(parsed.token_ns)


def test_first_chunk_with_choices_is_the_first_token_even_if_its_text_is_empty() -> None:
    reads = _reads(GOLDEN_SGLANG / "sse_chat.txt")
    parsed = parse_stream(reads)
    # SGLang's first chat chunk carries the role and an empty content; vLLM's bench counts it as TTFT
    assert b'"role":"assistant","content":""' in reads[0][1]
    assert parsed.token_ns[0] == reads[0][0]


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


@pytest.mark.parametrize("path", GOLDEN_SSE_STREAMS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fast_path_agrees_with_decoding_every_event(path: Path) -> None:
    reads = _reads(path)
    assert fast_events(reads) is not None  # the real engines' streams take the fast path
    assert parse_stream(reads) == parse_general(reads)


def test_fast_path_recognises_spaced_json_and_ignores_escaped_markers() -> None:
    reads = [
        (1, b'data: {"choices": [ {"text": "a"}]}\n\n'),
        (2, b'data: {"choices":[{"text":"say \\"choices\\":[{ x"}]}\n\n'),
        (3, b'data: {"choices": [], "usage": {"completion_tokens": 2, "prompt_tokens": 5},'),
        (4, b' "note": "\\"choices\\":[{"}\n\ndata: [DONE]\n\n'),
    ]
    assert fast_events(reads) is not None
    parsed = parse_stream(reads)
    assert parsed.token_ns == [1, 2]
    assert (parsed.completion_tokens, parsed.prompt_tokens, parsed.done) == (2, 5, True)
    assert parsed == parse_general(reads)


@pytest.mark.parametrize(
    "raw",
    [
        b'data: {"choices":[{"text":"a"}]}\n\ndata: {"choices":[{"text":"b"\n\ndata: [DONE]\n\n',
        b'data: {"choices":[{"text":"a"}]}\n\ndata: [DONE]\n\ndata: {"choices":[{"text":"b"}]}\n\n',
        b'data: {"choices":[{"text":"a"}]}\n\ndata: {"choices":[],"usage":{}} x\n\n',
    ],
)
def test_fast_path_rejects_malformed_streams(raw: bytes) -> None:
    reads = [(1, raw)]
    assert fast_events(reads) is not None
    with pytest.raises(ProtocolError):
        parse_stream(reads)
