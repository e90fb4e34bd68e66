"""requests.jsonl lines are encoded with orjson (`loadgen.results.rundir.line_text`): the same values
as json's encoding (floats round-trip exactly, whatever their form), ASCII, json's own text where
orjson cannot give that (non-ASCII strings, integers over 64 bits, datetimes, dataclasses), and the
ITLs read back from a line are the gaps encoded."""

from __future__ import annotations

import json
import random
import time
from array import array
from dataclasses import dataclass
from datetime import UTC, datetime

from loadgen.records import RequestRecord
from loadgen.results.record import line_itls_ns, request_line, request_text
from loadgen.results.rundir import _LINE, line_text

START = 10**12


def _json(row: dict[str, object]) -> str:
    return _LINE(row) + "\n"


def _record(rng: random.Random, tokens: int, gap_lo: int, gap_hi: int) -> RequestRecord:
    sent = START + rng.randint(0, 10**12)
    times = array("q", [sent + rng.randint(1, 10**9)])
    for _ in range(tokens - 1):
        times.append(times[-1] + rng.randint(gap_lo, gap_hi))
    return RequestRecord(
        7,
        "run-000007",
        False,
        sent - rng.randint(0, 10**6),
        16,
        tokens,
        sent_ns=sent,
        first_ns=times[0],
        last_ns=times[-1],
        done_ns=times[-1] + 1_000,
        token_ns=times,
        output_tokens=tokens,
        outcome="ok",
    )


def test_lines_carry_the_same_values_as_json_and_floats_round_trip() -> None:
    rng = random.Random(5)
    for _ in range(300):
        # gaps from 1 ns (5e-09 s: exponent form) to 20 s
        record = _record(rng, rng.randint(1, 64), 1, rng.choice([10_000, 10**6, 2 * 10**10]))
        row = request_line(record, START)
        text = line_text(row)
        assert text.endswith("\n")
        assert text.count("\n") == 1
        assert text.isascii()
        assert json.loads(text) == json.loads(_json(row)) == json.loads(json.dumps(row))
        assert json.loads(text)["itl_s"] == row["itl_s"]  # each float parses back to itself
        gaps = [b - a for a, b in zip(record.token_ns, record.token_ns[1:], strict=False)]
        assert line_itls_ns(request_text(record, START).encode()) == gaps


def test_floats_of_every_magnitude_round_trip() -> None:
    rng = random.Random(9)
    values = [0.0, -0.0, 1e-05, 5e-06, 1e16, 1.2345e17, 5e-324, 1.7976931348623157e308]
    values += [rng.random() * 10 ** rng.randint(-15, 20) for _ in range(5000)]
    parsed = json.loads(line_text({"v": values}))["v"]
    assert parsed == values
    assert [str(v)[0] == "-" for v in parsed] == [str(v)[0] == "-" for v in values]  # -0.0 too


def test_what_orjson_would_write_differently_is_jsons_text() -> None:
    @dataclass
    class Point:
        x: int

    for row in (
        {"error": "HTTP 500: caf\u00e9 \u2014 \U0001f600"},  # json escapes it: the journal is ASCII
        {"big": 2**70},
        {"at": datetime(2026, 12, 2, 1, 2, 3, tzinfo=UTC)},
        {"point": Point(1)},
        {"nested": {"k": [1, "\u00e9", None, True]}},
    ):
        assert line_text(row) == _json(row)


def test_plain_lines_are_byte_for_byte_jsons_and_several_times_cheaper() -> None:
    rng = random.Random(1)
    row = request_line(_record(rng, 256, 1_000_000, 3_000_000), START)  # gaps of 1-3 ms
    assert line_text(row) == _json(row)  # no exponent forms here: the same bytes

    def best(encode: object, n: int = 200) -> float:
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(n):
                encode(row)  # type: ignore[operator]
            times.append(time.perf_counter() - t0)
        return min(times)

    assert best(line_text) * 3 < best(_json)
