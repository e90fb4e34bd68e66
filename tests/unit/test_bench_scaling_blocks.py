"""bench.scaling_blocks: which servers run, a rate held in every block, ratios to the plain run on the
same server with the worst TTFT error, and the targets."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from bench import scaling_blocks as sb
from bench.refbench import Tools
from bench.scaling import PLAIN, Point, ceiling_lines

TOOLS = Tools(Path("/x/refserver"), Path("/x/refclient"))


def _pt(workers: int, asked: float, lag: float = 0.5, ttft: float = 0.3) -> Point:
    return Point(workers, asked, asked, lag, 0.2, ttft)


def test_server_kinds_default_to_both_when_the_reference_server_is_there() -> None:
    assert sb.server_kinds(None, TOOLS)[0] == ("own", "ref")
    assert sb.server_kinds("ref", TOOLS)[0] == ("ref",)
    kinds, line = sb.server_kinds("", "Go is not installed")
    assert kinds == ("own",)
    assert "skipped: Go is not installed" in line
    with pytest.raises(ValueError, match="not available"):
        sb.server_kinds("both", "no Go")
    with pytest.raises(ValueError, match="SCALING_SERVER='nope'"):
        sb.server_kinds("nope", TOOLS)


def test_a_rate_is_held_only_when_sustained_in_every_block() -> None:
    one = [_pt(PLAIN, 800), _pt(PLAIN, 1200), _pt(2, 1600), _pt(2, 2400)]
    two = [_pt(PLAIN, 800), _pt(PLAIN, 1200, lag=3.0), _pt(2, 1600), _pt(2, 2400)]
    assert sb.held([one, two]) == {PLAIN: 800, 2: 2400}
    assert sb.held([[_pt(4, 800, lag=9.0)], [_pt(4, 800)]]) == {4: None}


def test_summary_gives_the_multiple_of_the_plain_ceiling_and_the_target() -> None:
    block = [_pt(PLAIN, 800), _pt(2, 800), _pt(2, 1600, ttft=1.5), _pt(8, 800), _pt(8, 1600, ttft=2.5)]
    lines = sb.summary_lines("ref", [block], 1600.0)
    assert lines[0] == "ref server, held in all 1 block(s):"
    assert "plain: 800 req/s, 1.00x plain" in lines[1]
    assert "2: 1600 req/s (grid top), 2.00x plain, TTFT error p99 <= 1.50 ms" in lines[2]
    assert lines[2].endswith("target 1.8x and < 2 ms: met")
    assert lines[3].endswith("target 6.5x and < 2 ms: not met")


def test_worst_ttft_counts_only_rates_held() -> None:
    block = [_pt(2, 800, ttft=0.4), _pt(2, 1600, ttft=1.0), _pt(2, 2400, lag=5.0, ttft=30.0)]
    assert sb.worst_ttft([block], 2, 1600) == 1.0
    assert math.isnan(sb.worst_ttft([block], 2, None))


def test_ceiling_lines_print_the_ttft_error_beside_the_ceiling() -> None:
    (line,) = ceiling_lines([_pt(PLAIN, 800, ttft=0.7), _pt(PLAIN, 1600, lag=4.0, ttft=9.0)])
    assert "800 req/s sustained" in line
    assert "TTFT error p99 <= 0.70 ms at the rates held" in line


def test_blocks_alternate_the_order_of_server_kinds(capsys: pytest.CaptureFixture[str]) -> None:
    ran: list[str] = []

    def grid(kind: str) -> object:
        def run() -> list[Point]:
            ran.append(kind)
            return [_pt(PLAIN, 100)]

        return run

    got = sb.run_kinds(("own", "ref"), 3, {k: grid(k) for k in ("own", "ref")})
    assert ran == ["own", "ref", "ref", "own", "own", "ref"]
    assert len(got["own"]) == len(got["ref"]) == 3
    assert "block 2/3, ref server" in capsys.readouterr().out


def test_a_plain_row_that_held_nothing_in_every_block_gives_no_ratio_not_nan() -> None:
    from bench.scaling import Point
    from bench.scaling_blocks import summary_lines

    quiet = [Point(0, 800.0, 800.0, 1.0, 0.1, 0.3), Point(8, 800.0, 800.0, 0.5, 0.1, 0.3)]
    noisy = [Point(0, 800.0, 800.0, 4.0, 0.1, 0.3), Point(8, 800.0, 800.0, 0.5, 0.1, 0.3)]
    lines = summary_lines("ref", [quiet, noisy], 800.0)
    assert "nan" not in "\n".join(lines)
    assert "none, no ratio (the plain run held no rate in every block)" in lines[1]
    assert "800 req/s (grid top), no ratio (the plain run" in lines[2]
