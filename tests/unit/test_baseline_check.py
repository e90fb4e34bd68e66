"""The check over plain stored runs (real detector, real manifest diff): where, how big, and why."""

from __future__ import annotations

import random
from typing import Any

from loadgen.analysis.changepoint import Change, DetectorSettings
from loadgen.baseline.check import (
    _finding,
    check_series,
    environment_changed,
    gating,
    placed,
    regressions,
    snapped,
)
from loadgen.baseline.history import StoredRun
from loadgen.baseline.report import console, document, markdown

SETTINGS = DetectorSettings(min_before=5)


def _runs(n: int, step_at: int | None, factor: float, *, failed_at: int | None = None) -> list[StoredRun]:
    """TPOT p99 around 10 ms (1% noise, seeded), `factor` times that from run `step_at` (0-based) on."""
    rng = random.Random(12)
    out = []
    for i in range(n):
        after = step_at is not None and i >= step_at
        tpot = 0.010 * (factor if after else 1.0) * (1 + rng.gauss(0, 0.01))
        manifest: dict[str, Any] = {"engine": {"engine": "vllm", "version": "0.27.0" if after else "0.26.0"}}
        status = "failed" if i == failed_at else "ok"
        out.append(
            StoredRun(
                f"run{i:02d}", f"2026-12-{i + 1:02d}T02:00:00Z", status, {"tpot_p99": tpot}, manifest, {}
            )
        )
    return out


def test_a_step_is_placed_at_its_first_run_and_explained_by_the_version() -> None:
    (finding,) = check_series("s", "s/a@x", _runs(12, 7, 1.15), ["tpot_p99"], SETTINGS)
    assert (finding.first_after, finding.last_before, finding.status) == ("run07", "run06", "confirmed")
    assert finding.worse
    assert finding.open
    assert abs(finding.relative - 0.15) < 0.03
    assert (finding.causes[0]["key"], finding.causes[0]["a"], finding.causes[0]["b"]) == (
        "engine.version",
        "0.26.0",
        "0.27.0",
    )
    assert gating([finding]) == [finding]


def test_a_steady_series_has_no_change() -> None:
    assert check_series("s", "s/a@x", _runs(12, None, 1.0), ["tpot_p99"], SETTINGS) == []


def test_an_improvement_is_reported_not_gated() -> None:
    (finding,) = check_series("s", "s/a@x", _runs(12, 7, 0.85), ["tpot_p99"], SETTINGS)
    assert finding.kind == "improvement"
    assert gating([finding]) == []
    assert console([finding], "confirmed")[0].startswith("improvement [confirmed]")


def test_failed_runs_are_left_out() -> None:
    runs = _runs(13, 8, 1.15, failed_at=7)  # run07 failed: the step's first ok run is run08
    (finding,) = check_series("s", "s/a@x", runs, ["tpot_p99"], SETTINGS)
    assert (finding.last_before, finding.first_after) == ("run06", "run08")


def test_json_and_markdown_carry_the_regression_and_its_cause() -> None:
    findings = check_series("s", "s/a@x", _runs(12, 7, 1.15), ["tpot_p99"], SETTINGS)
    doc = document(findings, "confirmed")
    assert doc["regressions"] == [
        {"suite": "s", "series": "s/a@x", "first_run_after": "run07", "metrics": ["tpot_p99"]}
    ]
    assert doc["failing"][0]["causes"][0]["key"] == "engine.version"
    text = markdown(findings, "confirmed")
    assert "1 open regression(s)" in text
    assert "1. `engine.version`: 0.26.0 -> 0.27.0" in text
    assert list(regressions(findings)) == [("s", "s/a@x", "run07")]


def test_a_change_found_a_run_late_is_placed_where_the_environment_changed() -> None:
    # the version changed at run 7, but noise made the statistics place the new level at run 8:
    # the one environment change within two runs is where it began
    runs = _runs(12, 7, 1.15)
    assert placed(runs, 8) == 7
    assert placed(runs, 6) == 7
    steady = _runs(12, None, 1.0)  # no environment change nearby: the statistics' index stands
    assert placed(steady, 8) == 8
    assert not environment_changed(runs[3], runs[4])
    assert environment_changed(runs[6], runs[7])


def test_a_change_is_snapped_only_to_the_one_environment_change_within_two_runs() -> None:
    assert snapped(8, 12, {7}.__contains__) == 7
    assert snapped(5, 12, {7}.__contains__) == 7
    assert snapped(4, 12, {7}.__contains__) == 4  # three runs away: the statistics' index stands
    assert snapped(8, 12, {7, 9}.__contains__) == 8  # two candidates: the manifest cannot choose
    assert snapped(11, 12, {12}.__contains__) == 11  # past the last run: never outside the history


def test_a_change_the_manifest_moves_to_the_newest_run_is_only_suspected() -> None:
    # the statistics confirmed a change at run 9 (runs 9 and 10 high); the version changed at run 10,
    # the newest: placed there, one run sits at the new level, so it is not confirmed yet
    runs = _runs(11, 10, 1.15)
    change = Change(
        index=9,
        detected_at=10,
        before_median=1.0,
        after_median=1.15,
        p_value=1e-4,
        worse=True,
        status="confirmed",
    )
    finding = _finding("s", "s/a@x", "tpot_p99", runs, change, True, min_after=2)
    assert finding.first_after == runs[10].run_id
    assert finding.status == "suspected"
    assert not gating([finding])
    later = _runs(12, 10, 1.15)  # one run more at the new level: confirmed
    assert _finding("s", "s/a@x", "tpot_p99", later, change, True, min_after=2).status == "confirmed"


def test_confirmation_runs_pick_the_series_with_an_open_suspected_regression() -> None:
    from loadgen.baseline.cycle import suspected_series

    runs = _runs(12, 11, 1.25)  # the newest run alone 25% worse: suspected
    findings = check_series("s", "s/a@x", runs, ["tpot_p99"], SETTINGS)
    assert [(f.status, f.open, f.worse) for f in findings] == [("suspected", True, True)]
    assert suspected_series(findings) == ["a"]
    assert suspected_series(check_series("s", "s/b@x", _runs(12, None, 1.0), ["tpot_p99"], SETTINGS)) == []
