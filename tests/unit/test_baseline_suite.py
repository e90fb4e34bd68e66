"""Suite files: validated before anything runs, every problem named FILE:LINE."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from loadgen.baseline.metrics import DEFAULT_METRICS
from loadgen.baseline.suite import load_suite, parse_suite
from loadgen.cli.main import cli
from loadgen.experiments.yamlnodes import PlanError

EXAMPLE = Path(__file__).parents[2] / "examples" / "baseline-sim.yaml"
GOOD = """\
name: nightly
engines:
  a: {kind: external, base_url: "http://127.0.0.1:8000", target: vllm}
series:
  - {name: c8, engine: a, workload: short, concurrency: 8}
"""


def test_the_example_suite_is_valid() -> None:
    suite = load_suite(EXAMPLE)
    assert suite.series == ("short-c8", "short-rate4")
    assert suite.detector.min_before == 5


def test_a_series_is_one_baseline_phase_with_one_load_point() -> None:
    suite = parse_suite(GOOD)
    (phase,) = suite.plan.phases
    assert (phase.name, phase.kind, phase.engines, phase.load_kind, phase.loads) == (
        "c8",
        "baseline",
        ("a",),
        "concurrency",
        (8.0,),
    )
    assert suite.metrics == DEFAULT_METRICS


@pytest.mark.parametrize(
    ("edit", "line", "words"),
    [
        (("concurrency: 8", "concurrency: -1"), 5, "positive integer"),
        (("engine: a", "engine: b"), 5, "unknown engine 'b'"),
        (("name: nightly", "name: nightly\nmetrics: [tpot_p98]"), 2, "unknown metric 'tpot_p98'"),
        (("name: nightly", "name: nightly\ncheck: {min_befor: 3}"), 2, "unknown key 'min_befor'"),
        (("concurrency: 8", "concurrency: 8, rate: 2"), 5, "exactly one load point"),
        (("name: nightly", "name: nightly\ncheck: {min_after: 0}"), 2, "positive integer, got 0"),
        (("name: nightly", "name: nightly\ncheck: {combined_share: 1.5}"), 2, "at most 1"),
    ],
)
def test_bad_suites_name_file_and_line(edit: tuple[str, str], line: int, words: str) -> None:
    with pytest.raises(PlanError) as caught:
        parse_suite(GOOD.replace(*edit), "s.yaml")
    assert any(p.startswith(f"s.yaml:{line}:") and words in p for p in caught.value.problems), caught.value


def test_zero_turns_off_the_settings_that_say_so() -> None:
    suite = parse_suite(
        GOOD.replace("name: nightly", "name: nightly\ncheck: {confirm_runs: 0, combined_share: 0}")
    )
    assert (suite.detector.confirm_runs, suite.detector.combined_share) == (0, 0.0)
    assert parse_suite(GOOD).detector.confirm_runs == 2  # the default, from bench/confirm_runs.py


def test_duplicate_series_are_refused() -> None:
    text = GOOD + "  - {name: c8, engine: a, workload: short, rate: 2}\n"
    with pytest.raises(PlanError, match=r"s.yaml:6: duplicate series name 'c8'"):
        parse_suite(text, "s.yaml")


def test_a_bad_suite_exits_2_before_running(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(GOOD.replace("concurrency: 8", "concurrency: zero"))
    result = CliRunner().invoke(cli, ["baseline", "run", str(bad), "--store", f"sqlite:///{tmp_path}/x.db"])
    assert result.exit_code == 2
    assert f"{bad}:5:" in result.output
    assert not (tmp_path / "x.db").exists()


def test_the_shipped_deploy_suite_is_valid() -> None:
    suite = load_suite(EXAMPLE.parents[1] / "deploy" / "kubernetes" / "base" / "suite.yaml")
    assert (suite.name, suite.series) == ("nightly", ("vllm-medium-rate8",))
