"""`--ground-truth FILE`: one JSON line per request with the times its bytes were really sent.

Fields (docs/CONTRACTS.md): request_id, x_request_id, arrival_ns, first_token_ns, last_token_ns,
arrival_wall_ns, first_token_wall_ns, last_token_wall_ns, prompt_tokens, tokens_sent, token_send_ns
(only with --ground-truth-tokens). `*_ns` are `time.perf_counter_ns()` (CLOCK_MONOTONIC, shared with
clients on the same host) stamped right after the bytes were handed to the socket; `*_wall_ns` are
`time.time_ns()` taken at the same moments.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any


@dataclass
class SendStamps:
    """Send times of one response: first and last token-bearing writes, optionally every one."""

    first_ns: int = 0
    last_ns: int = 0
    first_wall_ns: int = 0
    last_wall_ns: int = 0
    tokens_sent: int = 0
    token_ns: list[int] | None = field(default=None)

    def stamp(self, mono_ns: int, wall_ns: int, tokens: int) -> None:
        if not self.first_ns:
            self.first_ns, self.first_wall_ns = mono_ns, wall_ns
        self.last_ns, self.last_wall_ns = mono_ns, wall_ns
        self.tokens_sent += tokens
        if self.token_ns is not None:
            self.token_ns.extend([mono_ns] * tokens)


class GroundTruthWriter:
    """Appends ground-truth lines to a file (opened on start, flushed after every line)."""

    def __init__(self, path: str, with_tokens: bool) -> None:
        self.path = Path(path)
        self.with_tokens = with_tokens
        self._fh: IO[str] | None = None

    def open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = self.path.open("a", encoding="utf-8")

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def new_stamps(self) -> SendStamps:
        return SendStamps(token_ns=[] if self.with_tokens else None)

    def write(
        self,
        *,
        request_id: str,
        x_request_id: str | None,
        arrival_ns: int,
        arrival_wall_ns: int,
        prompt_tokens: int,
        stamps: SendStamps,
        outcome: str,
    ) -> None:
        record: dict[str, Any] = {
            "request_id": request_id,
            "x_request_id": x_request_id,
            "arrival_ns": arrival_ns,
            "first_token_ns": stamps.first_ns or None,
            "last_token_ns": stamps.last_ns or None,
            "arrival_wall_ns": arrival_wall_ns,
            "first_token_wall_ns": stamps.first_wall_ns or None,
            "last_token_wall_ns": stamps.last_wall_ns or None,
            "prompt_tokens": prompt_tokens,
            "tokens_sent": stamps.tokens_sent,
            "outcome": outcome,
        }
        if self.with_tokens:
            record["token_send_ns"] = stamps.token_ns
        if self._fh is not None:
            self._fh.write(json.dumps(record, separators=(",", ":")) + "\n")
            self._fh.flush()
