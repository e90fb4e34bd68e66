"""What a baseline change is blamed on: recorded differences only, key and both values, missing said."""

from __future__ import annotations

import copy
from typing import Any

from loadgen.analysis.changepoint import DetectorSettings
from loadgen.baseline.causes import NO_DIFFERENCE, per_pass, recorded_causes
from loadgen.baseline.noisy import latency_only, noisy_reasons


def _manifest(pass_id: str, run: str, version: str = "0.26.0") -> dict[str, Any]:
    return {
        "run_id": run,
        "started_at": f"2026-12-01T0{run[-1]}:00:00Z",
        "engine": {"engine": "vllm", "version": version},
        "config": {
            "rate": None,
            "max_concurrency": 8,
            "seed": 7,
            "extra_manifest": {"baseline": {"pass": pass_id}, "experiment": {"id": pass_id}},
        },
        "baseline": {"suite": "s", "series": "a", "pass": pass_id},
        "experiment": {"id": pass_id, "phase": "a"},
        "exporter": {"engines": [{"engine": "vllm", "version": version, "port": 8000, "uptime_s": 5}]},
    }


def test_per_pass_identifiers_are_never_causes() -> None:
    ranked, missing = recorded_causes(_manifest("pass-1", "run1"), _manifest("pass-2", "run2"))
    assert (ranked, missing) == ((), ())
    for key in (
        "config.extra_manifest.baseline.pass",
        "experiment.id",
        "run_id",
        "started_at",
        "baseline.pass",
    ):
        assert per_pass(key), key
    assert not per_pass("engine.version")
    assert not per_pass("config.seed")


def test_a_cause_names_its_key_and_both_values() -> None:
    after = _manifest("pass-2", "run2", version="0.27.0")
    after["config"]["seed"] = 8  # a raw context key: its own row, not a count of keys
    ranked, _ = recorded_causes(_manifest("pass-1", "run1"), after)
    rows = [(r["key"], r["a"], r["b"]) for r in ranked]
    assert rows[0] == ("engine.version", "0.26.0", "0.27.0")
    assert ("config.seed", 7, 8) in rows


def test_a_vanished_exporter_is_missing_not_a_cause() -> None:
    after = copy.deepcopy(_manifest("pass-2", "run2"))
    after["exporter"] = {}
    ranked, missing = recorded_causes(_manifest("pass-1", "run1"), after)
    assert not [r for r in ranked if r["key"].startswith("exporter")]
    assert missing == ("exporter.engines: not recorded by the run after",)


def test_a_launch_flag_added_is_a_cause_not_a_missing_section() -> None:
    before = _manifest("pass-1", "run1")
    before["engine"]["launch_args"] = {"max_num_seqs": 8, "port": "59213"}
    after = _manifest("pass-2", "run2", version="0.34.0")
    after["engine"]["launch_args"] = {"max_num_seqs": 8, "port": "56841", "speed_factor": "1.3"}
    ranked, missing = recorded_causes(before, after)
    keys = [r["key"] for r in ranked]
    assert keys[0] == "engine.version"
    assert "engine.launch_args.speed_factor" in keys
    assert missing == ()  # both runs recorded the section: one key new in it is no missing fact


def test_no_difference_text() -> None:
    assert NO_DIFFERENCE.startswith("no recorded difference: the cause is outside the run record")


def test_noisy_reasons_from_the_record() -> None:
    clean: dict[str, Any] = {"error_rate": 0.0, "schedule_lag_s": {"p99": 0.001}}
    assert noisy_reasons(clean, {"config": {"max_error_rate": 0.1}}) == []
    saturated = {**clean, "client_saturated": {"saturated": True}}
    assert noisy_reasons(saturated, {}) == ["client saturated"]
    late = {**clean, "schedule_lag_s": {"p99": 2.0}}
    assert noisy_reasons(late, {}) == ["late: schedule lag p99 2.00 s > 0.5 s"]
    failing = {**clean, "error_rate": 0.25}
    (reason,) = noisy_reasons(failing, {"config": {"max_error_rate": 0.1}})
    assert reason == "failed requests 25.0% > limit 10.0%"
    assert latency_only([reason])  # its counts still go to the error-rate test
    foreign = {"exporter": {"checks": [{"id": "foreign_gpu_processes", "severity": "warning"}]}}
    assert noisy_reasons(clean, foreign) == ["foreign GPU process"]
    host = {"client": {"load": {"steal_share": 0.3, "loadavg_1m_per_cpu": 0.5}}}
    assert noisy_reasons(clean, host) == ["host load: CPU steal 30% > 10%"]
    loaded = {"client": {"load": {"loadavg_1m_per_cpu": 9.0}}}
    assert noisy_reasons(clean, loaded) == []  # the load bound is off unless the suite sets it
    bound = DetectorSettings(max_load_per_cpu=1.5)
    assert noisy_reasons(clean, loaded, bound) == ["host load: load average 9.0 per CPU > 1.5"]
    assert not latency_only(noisy_reasons(saturated, {}))


def test_a_launched_engines_port_is_no_cause() -> None:
    before, after = _manifest("pass-1", "run1"), _manifest("pass-2", "run2")
    before["config"]["base_url"], after["config"]["base_url"] = (
        "http://127.0.0.1:37535",
        "http://127.0.0.1:60827",
    )
    before["cache"] = {"detail": "engine launched fresh: sim --port 37535"}
    after["cache"] = {"detail": "engine launched fresh: sim --port 60827"}
    before["engine"]["launch_command"] = ["python", "-m", "simengine", "--port", "37535"]
    after["engine"]["launch_command"] = ["python", "-m", "simengine", "--port", "60827"]
    assert recorded_causes(before, after) == ((), ())
    after["config"]["base_url"] = "http://10.0.0.2:37535"  # another host is a difference
    (row,), _ = recorded_causes(before, after)
    assert (row["key"], row["b"]) == ("config.base_url", "http://10.0.0.2:37535")
