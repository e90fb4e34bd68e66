"""A deterministic stand-in tokenizer and output text generator (no model vocabulary needed).

Text prompts are split into word pieces of at most 4 characters (about what BPE tokenizers average on
English), each hashed to a stable id, so equal text prefixes give equal token-id prefixes and the
prefix cache sees them. Token-id prompts (`prompt: [1, 2, 3]`) are used as given.
"""

from __future__ import annotations

import json
import re
import zlib
from typing import Any

VOCAB_SIZE = 128_000
BOS_ID = 1
_PIECE = re.compile(r"\s?\w{1,4}|\s?[^\w\s]|\s+")
# Output pieces: plain ASCII word fragments, JSON-escaped once here so the hot path only concatenates.
_WORDS = (
    " the",
    " GPU",
    " cache",
    " token",
    " batch",
    " memory",
    " queue",
    " model",
    " layer",
    " kernel",
    " stream",
    " prefix",
    " decode",
    " prefill",
    " block",
    " tensor",
    " of",
    " and",
    " to",
    " in",
    " a",
    " is",
    " with",
    " for",
    " on",
    ".",
    ",",
    " that",
    " each",
    " step",
)
OUTPUT_PIECES: tuple[str, ...] = _WORDS
OUTPUT_PIECES_JSON: tuple[bytes, ...] = tuple(json.dumps(w).encode() for w in _WORDS)


BOS_TEXT = "<|begin_of_text|>"


def piece_id(piece: str) -> int:
    """The token id of one word piece (ids 0 and 1 are special: 1 is BOS)."""
    return 2 + zlib.crc32(piece.encode()) % (VOCAB_SIZE - 2)


def tokenize_text(text: str) -> list[int]:
    """Stable token ids for `text`: a BOS id, then one id per word piece."""
    ids = [BOS_ID]
    for piece in _PIECE.findall(text):
        ids.append(2 + zlib.crc32(piece.encode()) % (VOCAB_SIZE - 2))
    return ids


def text_pieces(text: str) -> list[str]:
    """The word pieces `tokenize_text` gives one id each (BOS not included)."""
    return list(_PIECE.findall(text))


def chat_to_text(messages: list[Any]) -> str:
    """Render chat messages with a Llama-3-like template, so roles cost tokens like the real thing."""
    parts: list[str] = []
    for msg in messages:
        if not isinstance(msg, dict):
            raise ValueError("each message must be an object with 'role' and 'content'")
        content = msg.get("content", "")
        if isinstance(content, list):  # OpenAI content parts: keep the text ones
            content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        parts.append(f"<|start_header_id|>{msg.get('role', 'user')}<|end_header_id|>\n\n{content}<|eot_id|>")
    parts.append("<|start_header_id|>assistant<|end_header_id|>\n\n")
    return "".join(parts)


def prompt_to_ids(prompt: Any) -> list[list[int]]:
    """OpenAI `prompt`: a string, a list of strings, a list of token ids, or a list of id lists.

    Returns one token-id list per prompt (several prompts become several choices, as in vLLM).
    Raises ValueError naming what was wrong.
    """
    if isinstance(prompt, str):
        return [tokenize_text(prompt)]
    if isinstance(prompt, list) and prompt:
        if all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
            return [list(prompt)]
        if all(isinstance(p, str) for p in prompt):
            return [tokenize_text(p) for p in prompt]
        if all(isinstance(p, list) and p and all(isinstance(t, int) for t in p) for p in prompt):
            return [list(p) for p in prompt]
    raise ValueError("'prompt' must be a non-empty string, list of strings, or list of token ids")


def output_piece_index(seed: int, position: int) -> int:
    """Index into OUTPUT_PIECES of the output token at `position` of a request seeded by `seed`."""
    return (seed + position * 7919) % len(OUTPUT_PIECES)
