"""loadgen.jsonbytes: orjson's bytes where they are json's, json's everywhere else."""

from __future__ import annotations

import json
import math
import random
from enum import IntEnum

import pytest

from loadgen import jsonbytes
from loadgen.workload.generator import RequestSpec

COMPACT = json.JSONEncoder(separators=(",", ":")).encode
SORTED = json.JSONEncoder(sort_keys=True, separators=(",", ":")).encode


class Level(IntEnum):
    HIGH = 3


def _value(rng: random.Random, depth: int = 0) -> object:
    kind = rng.randrange(11 if depth < 3 else 7)
    if kind == 0:
        return rng.randrange(-(2**70), 2**70) if rng.random() < 0.2 else rng.randrange(-1000, 10**6)
    if kind == 1:
        return rng.choice([0.0, -0.0, 1e-5, 1e-4, 0.5, 123.25, 1e15, 1e16, 1e22, math.nan, math.inf, -1e400])
    if kind == 2:
        return rng.uniform(-1e18, 1e18) * 10 ** rng.randrange(-25, 3)
    if kind == 3:  # every ASCII character, DEL included
        return "".join(chr(rng.randrange(128)) for _ in range(rng.randrange(12)))
    if kind == 4:
        return rng.choice(["é", "日本", "\ud800", "plain", "tab\there"])
    if kind == 5:
        return rng.choice([True, False, None, Level.HIGH])
    if kind == 6:
        return (1, "x")
    if kind in (7, 8):
        return [_value(rng, depth + 1) for _ in range(rng.randrange(5))]
    keys = ["prompt", "model", "z", "a", "messages", "\x7f", "é"]
    return {rng.choice(keys): _value(rng, depth + 1) for _ in range(rng.randrange(5))}


def _json_or_error(encode, obj):  # type: ignore[no-untyped-def]
    try:
        return encode(obj).encode()
    except (TypeError, ValueError) as exc:
        return type(exc)


def test_bytes_are_json_bytes_for_any_value() -> None:
    rng = random.Random(23)
    for _ in range(20_000):
        obj = _value(rng)
        for ours, theirs in ((jsonbytes.compact, COMPACT), (jsonbytes.canonical, SORTED)):
            want = _json_or_error(theirs, obj)
            if isinstance(want, type):
                with pytest.raises(want):
                    ours(obj)
            else:
                assert ours(obj) == want, obj


def test_a_request_body_goes_through_orjson() -> None:
    """The usual body is orjson's (the fast path is taken), byte for byte json's."""
    body = {
        "model": "m",
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": 32,
        "temperature": 0.0,
        "prompt": list(range(100, 132)),
    }
    assert jsonbytes._orjson(body, 0) == COMPACT(body).encode()
    chat = {**body, "messages": [{"role": "user", "content": "hi \x01 there"}]}
    assert jsonbytes._orjson(chat, 0) == COMPACT(chat).encode()
    assert jsonbytes._orjson({**body, "prompt": "naïve"}, 0) is None  # json escapes it: json's


def test_fingerprint_form_is_unchanged() -> None:
    """canonical() is the text it always was (the fingerprint of earlier runs stays comparable)."""
    specs = [
        RequestSpec(0, [101, 102, 7999], 3, 16),
        RequestSpec(1, 'text with "quotes" and \\ and \x7f', 5, 8, system="sys é"),
        RequestSpec(2, "chat", 1, 4, messages=[{"role": "user", "content": [{"type": "text", "x": 1e-7}]}]),
    ]
    for spec in specs:
        body = {"prompt": spec.prompt, "system": spec.system, "messages": spec.messages}
        body["out"] = spec.output_len
        assert spec.canonical() == SORTED(body)
        assert spec.canonical_bytes() == SORTED(body).encode()
