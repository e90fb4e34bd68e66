"""A finished request's requests.jsonl line in C (`loadgen._json.line`) against the Python
encoder (`line_text(request_line(...))`, orjson): where C answers, the same bytes; where a record holds
something C does not take, C declines and `request_text` writes the Python line."""

from __future__ import annotations

import random
from array import array
from typing import Any

import orjson
import pytest

from loadgen.records import RequestRecord
from loadgen.results import record
from loadgen.results.rundir import line_text

_json = pytest.importorskip("loadgen._json", reason="the C line encoder is not built here")


def _python(r: RequestRecord, start_ns: int) -> str:
    return line_text(record.request_line(r, start_ns))


def _ns(rng: random.Random) -> int:
    """A span in ns from 0 to ~10^17 (two years), weighted to every float layout: exponent notation
    below 10 µs, the 1e-5 edge, seconds, past the 52 days where C formats through the double."""
    scale = rng.choice([0, 1, 4, 5, 6, 9, 12, 15, 16, 17])
    return rng.randrange(0, 10**scale + 1) if scale else rng.choice([0, 1, 10_000, 9_999, 10_001])


def _record(rng: random.Random) -> tuple[RequestRecord, int]:
    sent = rng.randrange(0, 10**18)
    first = None if rng.random() < 0.1 else sent + _ns(rng)
    last = None if first is None or rng.random() < 0.1 else first + _ns(rng)
    t0 = first or 0
    gaps = [_ns(rng) for _ in range(rng.randrange(0, 40))]
    times = [t0 + sum(gaps[:i]) for i in range(len(gaps))]
    text = 'ab"\\\n\t\r\b\f\x01\x1f\x7f-/0'
    r = RequestRecord(
        index=rng.randrange(10**7),
        x_request_id="".join(rng.choice(text) for _ in range(rng.randrange(0, 12))),
        warmup=rng.random() < 0.2,
        scheduled_ns=sent - _ns(rng),
        input_len=rng.randrange(10**6),
        output_len=rng.randrange(10**6),
        sent_ns=sent,
        first_ns=first,
        last_ns=last,
        done_ns=None if rng.random() < 0.2 else sent + _ns(rng),
        token_ns=array("q", times) if rng.random() < 0.7 else times,
        prompt_tokens=rng.choice([None, 0, 5, 10**12]),
        cached_tokens=rng.choice([None, 0, 3]),
        output_tokens=rng.randrange(0, 3000),
        token_count=rng.choice(["usage", "estimated"]),
        outcome=rng.choice([None, "ok", "http_error", "cancelled"]),
        http_status=rng.choice([None, 200, 500]),
        error=rng.choice(
            [None, 'boom "x"\n', "HTTP 500: \x00", "".join(rng.choice(text) for _ in range(30))]
        ),
        slot_free_ns=rng.choice([0, sent - _ns(rng), sent + _ns(rng)]),
        host_stall_ns=_ns(rng),
        session_id=rng.choice([None, None, "s-1"]),
        turn_index=rng.choice([None, 0, 3]),
    )
    return r, rng.choice([0, sent - _ns(rng), sent + _ns(rng)])


def test_random_records_encode_as_orjson_does() -> None:
    rng = random.Random(23)
    for _ in range(5_000):
        r, start = _record(rng)
        got = _json.line(r, start)
        assert got == _python(r, start), (r, start)
        assert orjson.loads(got) == record.request_line(r, start)  # and reads back as the same values


def test_float_layouts_at_each_edge() -> None:
    """Each power of ten from 1 ns to 10^17 ns, and its neighbours, as a gap and as a time after start."""
    for k in range(18):
        for n in (10**k - 1, 10**k, 10**k + 1, 3 * 10**k, -(10**k)):
            r = RequestRecord(1, "x", False, 0, 1, 1, sent_ns=max(n, 0), token_ns=[0, abs(n)])
            for start in (0, n):
                assert _json.line(r, start) == _python(r, start), (n, start)


def test_tpot_is_any_float() -> None:
    rng = random.Random(5)
    for _ in range(2_000):
        first = rng.randrange(10**12)
        r = RequestRecord(
            1,
            "x",
            False,
            0,
            1,
            1,
            first_ns=first,
            last_ns=first + rng.randrange(10**12),
            output_tokens=rng.randrange(2, 10**6),
        )
        assert _json.line(r, 0) == _python(r, 0)


@pytest.mark.parametrize(
    "change",
    [
        {"x_request_id": "ünicode"},  # not ASCII: json's escapes, in Python
        {"error": "HTTP 500: ✗"},
        {"index": True},  # an int subclass
        {"input_len": 3.0},  # a float where an int goes
        {"sent_ns": 2**63},  # past 64 bits
        {"prompt_tokens": 2**64},
        {"token_ns": array("d", [1.0, 2.0])},
        {"token_ns": [1, 2**70]},
        {"token_ns": (1, "2")},
        {"warmup": 1},
        {"outcome": b"ok"},
    ],
)
def test_what_c_does_not_take_is_encoded_in_python(change: dict[str, Any]) -> None:
    r = RequestRecord(4, "x", False, 0, 1, 1, sent_ns=10, first_ns=20, last_ns=30, token_ns=[20, 30])
    for name, value in change.items():
        setattr(r, name, value)
    assert _json.line(r, 0) is None
    try:
        expected = _python(r, 0)
    except TypeError:  # the Python encoder's own failure (a float in a list of ints): the same error
        with pytest.raises(TypeError):
            record.request_text(r, 0)
        return
    assert record.request_text(r, 0) == expected


def test_an_encoder_that_disagrees_with_orjson_here_is_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    class Other:  # another orjson release's float layout, say
        @staticmethod
        def line(r: RequestRecord, start_ns: int) -> str:
            return _python(r, start_ns).replace("e-6", "e-06")

    monkeypatch.setattr(record, "_json", Other)
    record._checked()
    assert record._json is None
    monkeypatch.setattr(record, "_json", _json)
    record._checked()
    assert record._json is _json  # this build's agrees


# same(obj): jsonbytes._same in C


class _Int(int):
    pass


def _value(rng: random.Random, depth: int = 0) -> Any:
    kinds = ["int", "str", "bool", "none", "float", "other"] + (["list", "dict"] * 2 if depth < 4 else [])
    kind = rng.choice(kinds)
    if kind == "list":
        return [_value(rng, depth + 1) for _ in range(rng.randrange(0, 5))]
    if kind == "dict":
        return {rng.choice(["a", "b", 1, None]): _value(rng, depth + 1) for _ in range(rng.randrange(0, 5))}
    if kind == "float":
        return rng.choice(
            [0.0, -0.0, 1e-4, 9.99e-5, 1e16, 9.9e15, -1e16, 0.5, float("nan"), float("inf"), -1e-5]
        )
    if kind == "other":
        return rng.choice([(1, 2), b"x", _Int(3), {1, 2}, 1j])
    return {"int": rng.randrange(-(2**70), 2**70), "str": "s\x7f", "bool": True, "none": None}[kind]


def test_same_answers_as_python() -> None:
    from loadgen import jsonbytes

    rng = random.Random(17)
    answers = set()
    for _ in range(20_000):
        value = _value(rng)
        answer = _json.same(value)
        assert answer is jsonbytes._same(value), value
        answers.add(answer)
    assert answers == {True, False}
    deep: list[Any] = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(RecursionError):
        _json.same(deep)


# token_ids: generator._token_ids from one getrandbits


def test_token_ids_are_the_python_draws_and_leave_the_same_state(monkeypatch: pytest.MonkeyPatch) -> None:
    from loadgen.workload import generator

    rng = random.Random(31)
    for _ in range(300):
        seed, n = f"{rng.randrange(100)}:req:{rng.randrange(10**6)}", rng.choice([0, 1, 2, 3, 32, 257, 4096])
        native, python = random.Random(seed), random.Random(seed)
        got = generator._token_ids(native, n)
        monkeypatch.setattr(generator, "_json", None)
        assert got == generator._token_ids(python, n)
        monkeypatch.setattr(generator, "_json", _json)
        assert native.getstate() == python.getstate()  # the next draws are the same too
        assert all(generator.TOKEN_ID_LOW <= t <= generator.TOKEN_ID_HIGH for t in got)
    assert _json.token_ids(b"\xff" * 16, 100, 7900.0) == [7999, 7999]  # the largest draw stays in range
