"""JSONL datasets, checked line by line before a run: one record per line, errors as `FILE:LINE: ...`.

A line holds `prompt` (text, or token ids), `messages` (chat) or ShareGPT `conversations`, and
optionally `output_len` / `max_tokens`. Reading (bytes from disk) is kept apart from parsing
(`parse_lines`, pure), so every rule is tested on plain values.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadgen.config import ConfigError

SHAREGPT_HUMAN = ("human", "user")
SHAREGPT_REPLY = ("gpt", "assistant", "chatgpt", "bing", "bard")
SHAREGPT_SYSTEM = ("system",)
WORDS_PER_TOKEN = 3 / 4  # a ShareGPT reply of N words is sized as N * 4/3 output tokens


@dataclass(frozen=True)
class DatasetRecord:
    """One validated dataset line: exactly one of `prompt` / `messages` is set."""

    prompt: str | list[int] | None
    messages: list[dict[str, Any]] | None
    output_len: int | None
    system: str | None = None


def _kind(value: Any) -> str:
    """`str 'x'`, `int 5`: what was seen, for an error message (long values cut)."""
    shown = repr(value)
    return f"{type(value).__name__} {shown if len(shown) <= 40 else shown[:37] + '...'}"


def _output_len(raw: dict[str, Any], where: str) -> int | None:
    """`output_len` (or `max_tokens`): an integer >= 1, or absent."""
    key = "output_len" if "output_len" in raw else "max_tokens"
    value = raw.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{where}: field {key!r} must be an integer >= 1, got {_kind(value)}")
    return value


def _prompt(raw: dict[str, Any], where: str, endpoint: str) -> DatasetRecord:
    prompt = raw["prompt"]
    if isinstance(prompt, list) and prompt and all(_is_token_id(t) for t in prompt):
        if endpoint == "chat":
            raise ConfigError(
                f"{where}: field 'prompt' holds token ids, which --endpoint chat cannot take; use text"
            )
        return DatasetRecord(prompt, None, _output_len(raw, where))
    if not isinstance(prompt, str) or not prompt.strip():
        raise ConfigError(
            f"{where}: field 'prompt' must be non-empty text or a list of token ids (integers >= 0), "
            f"got {_kind(prompt)}"
        )
    return DatasetRecord(prompt, None, _output_len(raw, where))


def _is_token_id(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _messages(raw: dict[str, Any], where: str, endpoint: str) -> DatasetRecord:
    messages = raw["messages"]
    if not isinstance(messages, list) or not messages:
        raise ConfigError(
            f"{where}: field 'messages' must be a non-empty list of {{role, content}} objects, "
            f"got {_kind(messages)}"
        )
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise ConfigError(f"{where}: field 'messages[{i}]' needs a string 'role', got {_kind(message)}")
        if not isinstance(message.get("content"), str | list):
            raise ConfigError(
                f"{where}: field 'messages[{i}].content' must be text or a list of parts, "
                f"got {_kind(message.get('content'))}"
            )
    if endpoint != "chat":
        raise ConfigError(
            f"{where}: field 'messages' is a chat record; the completions endpoint takes 'prompt' "
            "(pass --endpoint chat)"
        )
    return DatasetRecord(None, list(messages), _output_len(raw, where))


def _turns(raw: dict[str, Any], where: str) -> list[tuple[str, str]]:
    turns = raw["conversations"]
    if not isinstance(turns, list):
        raise ConfigError(f"{where}: field 'conversations' must be a list of turns, got {_kind(turns)}")
    out = []
    for i, turn in enumerate(turns):
        if not isinstance(turn, dict) or not isinstance(turn.get("value"), str):
            raise ConfigError(
                f"{where}: field 'conversations[{i}]' needs 'from' and a string 'value', got {_kind(turn)}"
            )
        out.append((str(turn.get("from", "")).lower(), turn["value"]))
    return out


def _sharegpt(raw: dict[str, Any], where: str, endpoint: str) -> DatasetRecord:
    """First human turn is the prompt, a system turn before it is kept, the first reply sizes the output."""
    turns = _turns(raw, where)
    human = next((i for i, (who, text) in enumerate(turns) if who in SHAREGPT_HUMAN and text.strip()), None)
    if human is None:
        raise ConfigError(f"{where}: field 'conversations' has no non-empty human turn")
    system = next((text for who, text in turns[:human] if who in SHAREGPT_SYSTEM and text.strip()), None)
    reply = next((text for who, text in turns[human:] if who in SHAREGPT_REPLY), None)
    out_len = _output_len(raw, where)
    if out_len is None and reply and reply.split():
        out_len = max(1, round(len(reply.split()) / WORDS_PER_TOKEN))
    return DatasetRecord(turns[human][1], None, out_len, system=system)


# the first key present decides the record's kind
RECORD_KINDS: dict[str, Callable[[dict[str, Any], str, str], DatasetRecord]] = {
    "conversations": _sharegpt,
    "messages": _messages,
    "prompt": _prompt,
}


def parse_record(raw: Any, where: str, endpoint: str) -> DatasetRecord:
    """One decoded JSON line -> a DatasetRecord, or ConfigError `FILE:LINE: field ...`."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a JSON object per line, got {_kind(raw)}")
    for key, parse in RECORD_KINDS.items():
        if key in raw:
            return parse(raw, where, endpoint)
    raise ConfigError(f"{where}: expected a 'prompt', 'messages' or 'conversations' key, got {sorted(raw)}")


def json_line(text: str, where: str) -> Any:
    """One line of a JSONL file parsed; bad JSON raises one ConfigError naming `where` (FILE:LINE)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{where}: invalid JSON ({exc.msg} at column {exc.colno})") from None


def _decode(line: bytes, where: str) -> str:
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{where}: not UTF-8 (byte 0x{line[exc.start]:02x} at column {exc.start + 1})"
        ) from None


def parse_lines(lines: Iterable[bytes], name: str, endpoint: str) -> list[DatasetRecord]:
    """Every non-blank line validated in order; the first bad one raises naming `name:LINE`."""
    records = []
    for number, line in enumerate(lines, 1):
        where = f"{name}:{number}"
        text = _decode(line, where).removeprefix("\ufeff")  # a BOM some editors write
        if not text.strip():
            continue
        records.append(parse_record(json_line(text, where), where, endpoint))
    if not records:
        raise ConfigError(f"dataset {name!r} has no requests")
    return records


def read_dataset(path: Path, endpoint: str) -> list[DatasetRecord]:
    """Read and validate a JSONL dataset file (I/O here, rules in `parse_lines`)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read dataset {str(path)!r}: {exc.strerror}") from None
    return parse_lines(data.splitlines(), str(path), endpoint)
