"""vLLM's `POST /tokenize` and `POST /detokenize` over the simulator's own tokenizer (simengine.tokens).

Bodies as vLLM's `serve/tokenize/protocol.py`: a completion request `{"prompt": str,
"add_special_tokens": true, "return_token_strs": false}` or a chat request `{"messages": [...]}`
answers `{"count", "max_model_len", "tokens", "token_strs"}`; `{"tokens": [int]}` answers
`{"prompt": str}`. Token ids are the ones a completion or chat request with the same text is
computed (and prefix-cached) with, so `count` equals that request's `usage.prompt_tokens`.

The simulated tokenizer hashes word pieces (it has no vocabulary), so an id can be turned back into
text only when this server produced it: `/tokenize` remembers the pieces it handed out (up to
`PieceBook.capacity` ids); BOS detokenizes to `<|begin_of_text|>`, any other id it never produced to
nothing.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from simengine.personalities.base import Personality, json_response
from simengine.tokens import BOS_ID, BOS_TEXT, chat_to_text, piece_id, text_pieces


class PieceBook:
    """Token id -> the piece it was made from, for ids this server handed out (bounded)."""

    def __init__(self, capacity: int = 1 << 17) -> None:
        self.capacity = capacity
        self.pieces: dict[int, str] = {BOS_ID: BOS_TEXT}

    def tokenize(self, text: str, add_bos: bool) -> tuple[list[int], list[str]]:
        """Ids and pieces of `text` (BOS first when `add_bos`), remembering each new piece."""
        pieces = ([BOS_TEXT] if add_bos else []) + text_pieces(text)
        ids = [BOS_ID] if add_bos else []
        for piece in pieces[len(ids) :]:
            tid = piece_id(piece)
            ids.append(tid)
            if len(self.pieces) < self.capacity:
                self.pieces.setdefault(tid, piece)
        return ids, pieces

    def detokenize(self, ids: list[int]) -> str:
        """The text of `ids` (ids this server never produced contribute nothing)."""
        return "".join(self.pieces.get(i, "") for i in ids)


def _bad(p: Personality, message: str, param: str) -> web.Response:
    return p.error(400, message, "BadRequestError", param)


def _text_of(body: dict[str, Any]) -> tuple[str, bool] | str:
    """(text, add BOS) of a tokenize body, or the error message."""
    if "messages" in body:
        messages = body["messages"]
        if not isinstance(messages, list) or not messages:
            return "'messages' must be a non-empty list."
        try:
            return chat_to_text(messages), True  # as /v1/chat/completions computes it (BOS included)
        except ValueError as exc:
            return str(exc)
    prompt = body.get("prompt")
    if not isinstance(prompt, str):
        return "'prompt' must be a string."
    return prompt, bool(body.get("add_special_tokens", True))


def add_tokenize_routes(app: web.Application, p: Personality, book: PieceBook) -> None:
    """Register /tokenize and /detokenize for personality `p`."""

    async def tokenize(request: web.Request) -> web.Response:
        try:
            body = await request.json()
        except ValueError:
            return p.error(400, "Invalid JSON in the request body.", "BadRequestError")
        if not isinstance(body, dict):
            return _bad(p, "The request body must be a JSON object.", "prompt")
        found = _text_of(body)
        if isinstance(found, str):
            return _bad(p, found, "messages" if "messages" in body else "prompt")
        ids, pieces = book.tokenize(*found)
        strs = pieces if body.get("return_token_strs") else None
        limit = p.state.cfg.max_model_len
        return json_response({"count": len(ids), "max_model_len": limit, "tokens": ids, "token_strs": strs})

    async def detokenize(request: web.Request) -> web.Response:
        try:
            body = await request.json()
        except ValueError:
            return p.error(400, "Invalid JSON in the request body.", "BadRequestError")
        ids = body.get("tokens") if isinstance(body, dict) else None
        if not isinstance(ids, list) or not all(isinstance(t, int) and not isinstance(t, bool) for t in ids):
            return _bad(p, "'tokens' must be a list of token ids.", "tokens")
        return json_response({"prompt": book.detokenize(ids)})

    app.router.add_post("/tokenize", tokenize)
    app.router.add_post("/detokenize", detokenize)
