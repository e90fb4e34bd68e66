"""Byte templates of the engines' SSE chunks, so the hot path only concatenates bytes.

Shapes are copied from real captures (tests/fixtures/golden): vLLM 0.26.0 and SGLang 0.5.14, for
`/v1/completions` and `/v1/chat/completions`, with and without `stream_options`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

DONE = b"data: [DONE]\n\n"


@dataclass(frozen=True)
class ChunkStyle:
    """How one engine shapes the chunks of one endpoint (all fragments are raw JSON bytes)."""

    object_name: bytes
    text_open: bytes  # between the choice index and the token text
    text_close: bytes  # after the token text
    tail: bytes  # rest of the choice, with %s for the finish reason (b"null" or b'"length"')
    stop_reason: str  # "always" / "on_finish" / "never": when the choice carries vLLM's "stop_reason"
    close_plain: bytes  # end of a chunk without usage
    usage_fmt: bytes  # usage object for continuous_usage_stats / final chunk: %d prompt, total, completion
    final_usage_fmt: bytes
    final_tail: bytes  # after the final usage object
    role_chunk: bytes | None  # chat: first chunk with the role, before the first token
    finish_chunk: bytes | None  # SGLang chat: the finish reason comes in its own empty-delta chunk
    # the final usage's `prompt_tokens_details` when there are none to report (its %b): vLLM and
    # SGLang's completions leave the key out (exclude_none), SGLang's chat writes null
    details_null: bytes = b""


DETAILS_FMT = b',"prompt_tokens_details":{"cached_tokens":%d}'


VLLM_COMPLETION = ChunkStyle(
    b"text_completion",
    b',"text":',
    b"",
    b',"logprobs":null,"finish_reason":%s%s,"prompt_token_ids":null,"token_ids":null}]',
    "always",
    b"}\n\n",
    b',"usage":{"prompt_tokens":%d,"total_tokens":%d,"completion_tokens":%d}}\n\n',
    b'"usage":{"prompt_tokens":%d,"total_tokens":%d,"completion_tokens":%d%b}',
    b',"system_fingerprint":%s}\n\n',
    None,
    None,
)
VLLM_CHAT = ChunkStyle(
    b"chat.completion.chunk",
    b',"delta":{"content":',
    b"}",
    b',"logprobs":null,"finish_reason":%s%s,"token_ids":null}]',
    "on_finish",
    b"}\n\n",
    VLLM_COMPLETION.usage_fmt,
    VLLM_COMPLETION.final_usage_fmt,
    VLLM_COMPLETION.final_tail,
    b',"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],'
    b'"prompt_token_ids":null,"prompt_text":null}\n\n',
    None,
)
_SGL_USAGE = (
    b',"usage":{"prompt_tokens":%d,"total_tokens":%d,"completion_tokens":%d,'
    b'"prompt_tokens_details":null,"reasoning_tokens":0}}\n\n'
)
SGLANG_COMPLETION = ChunkStyle(
    b"text_completion",
    b',"text":',
    b"",
    b',"logprobs":null,"finish_reason":%s%s,"matched_stop":null}]',
    "never",
    b',"usage":null}\n\n',
    _SGL_USAGE,
    b'"usage":{"prompt_tokens":%d,"total_tokens":%d,"completion_tokens":%d%b,"reasoning_tokens":0}',
    b"}\n\n",
    None,
    None,
)
SGLANG_CHAT = ChunkStyle(
    b"chat.completion.chunk",
    b',"delta":{"reasoning_content":null,"content":',
    b"}",
    b',"logprobs":null,"finish_reason":%s%s,"matched_stop":null}]',
    "never",
    b"}\n\n",
    _SGL_USAGE,
    b'"usage":{"prompt_tokens":%d,"total_tokens":%d,"completion_tokens":%d%b,"reasoning_tokens":0}',
    b"}\n\n",
    b',"delta":{"reasoning_content":null,"role":"assistant","content":""},"logprobs":null,'
    b'"finish_reason":null,"matched_stop":null}]}\n\n',
    b',"delta":{"reasoning_content":null},"logprobs":null,"finish_reason":%s,"matched_stop":null}]}\n\n',
    b',"prompt_tokens_details":null',
)


class ChunkWriter:
    """Builds the SSE events of one response (one request id, model, created time)."""

    __slots__ = ("style", "head", "head_empty", "fingerprint", "null_tail", "continuous")

    def __init__(
        self,
        style: ChunkStyle,
        request_id: str,
        created: int,
        model: str,
        fingerprint: str,
        continuous_usage: bool,
    ) -> None:
        self.style = style
        common = b'data: {"id":%s,"object":"%s","created":%d,"model":%s,"choices":' % (
            json.dumps(request_id).encode(),
            style.object_name,
            created,
            json.dumps(model).encode(),
        )
        self.head = common + b'[{"index":'
        self.head_empty = common + b"[],"
        self.fingerprint = json.dumps(fingerprint).encode()
        self.null_tail = self._tail(None)
        self.continuous = continuous_usage

    def _tail(self, finish: str | None) -> bytes:
        reason = b"null" if finish is None else b'"%s"' % finish.encode()
        mode = self.style.stop_reason
        stop = b',"stop_reason":null' if mode == "always" or (mode == "on_finish" and finish) else b""
        return self.style.tail % (reason, stop)

    def token(self, index: int, text_json: bytes, finish: str | None, usage: tuple[int, int] | None) -> bytes:
        """One token chunk; `usage` (prompt, completion) only with continuous_usage_stats."""
        s = self.style
        tail = self.null_tail if finish is None else self._tail(finish)
        if usage is not None:
            p, c = usage
            end = s.usage_fmt % (p, p + c, c)
        else:
            end = s.close_plain
        return b"".join((self.head, b"%d" % index, s.text_open, text_json, s.text_close, tail, end))

    def role(self, index: int) -> bytes:
        """Chat's first chunk (role, empty content); empty for completions."""
        if self.style.role_chunk is None:
            return b""
        return self.head + b"%d" % index + self.style.role_chunk

    def finish(self, index: int, reason: str) -> bytes:
        """SGLang chat's separate finish chunk; empty where the last token carries the reason."""
        if self.style.finish_chunk is None:
            return b""
        return self.head + b"%d" % index + self.style.finish_chunk % (b'"%s"' % reason.encode())

    def usage(self, prompt_tokens: int, completion_tokens: int, cached_tokens: int | None = None) -> bytes:
        """The final usage-only chunk (stream_options.include_usage); `cached_tokens` (None: not
        reported) goes in `prompt_tokens_details`."""
        s = self.style
        details = s.details_null if cached_tokens is None else DETAILS_FMT % cached_tokens
        total = prompt_tokens + completion_tokens
        body = s.final_usage_fmt % (prompt_tokens, total, completion_tokens, details)
        tail = s.final_tail % self.fingerprint if b"%s" in s.final_tail else s.final_tail
        return self.head_empty + body + tail

    @property
    def finish_in_token(self) -> bool:
        return self.style.finish_chunk is None
