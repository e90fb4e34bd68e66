"""Issue #24 item 3: runs.csv, the series label of `loadgen report` and `loadgen diff` read an
engine parameter (and the engine, its version, the GPUs) by one rule (loadgen.results.run_fields,
`resolve_params` for the parameters): a recorded
`auto` or unknown value is no value, and the exporter's reading of the engine that served the run
fills it in."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from loadgen.analysis.diff import manifest_differences
from loadgen.analysis.diff_facts import run_facts
from loadgen.analysis.series import series_label
from loadgen.results.rundir import RunRecord, csv_row


def record(max_num_seqs: Any, source: str, exporter_value: int | None) -> RunRecord:
    exporter = {
        "engines": [
            {"engine": "vllm", "url": "http://127.0.0.1:8000", "params": {"max_num_seqs": exporter_value}},
        ]
    }
    manifest = {
        "engine": {
            "engine": "vllm",
            "base_url": "http://127.0.0.1:8000",
            "params": {"max_num_seqs": max_num_seqs, "tensor_parallel_size": 1},
            "param_sources": {"max_num_seqs": source, "tensor_parallel_size": "launch flag"},
        },
        "exporter": exporter if exporter_value is not None else None,
    }
    return RunRecord("r", manifest, {"engine": "vllm", "scenario": "s"}, Path("/nonexistent"))


def test_an_auto_value_is_filled_by_the_exporter_in_the_label_as_in_the_diff() -> None:
    auto = record("auto", "default", exporter_value=64)
    assert "max_num_seqs=64" in series_label(auto)  # was: the label skipped it, the diff read 64
    known = record(64, "launch flag", exporter_value=None)
    assert "max_num_seqs=64" in series_label(known)
    rows = manifest_differences(auto.manifest, known.manifest)
    assert not [r for r in rows if "max_num_seqs" in str(r)]  # the same value by the same rule


def test_an_unknown_value_labels_nothing() -> None:
    unknown = record(None, "unknown (no launch flags, no server info)", exporter_value=None)
    assert "max_num_seqs" not in series_label(unknown)
    assert "tensor_parallel_size=1" in series_label(unknown)


def test_runs_csv_shows_what_the_diff_and_the_label_show() -> None:
    """runs.csv reads max_num_seqs, the engine and its version by the same rule (run_fields)."""
    auto = record("auto", "default", exporter_value=64)
    auto.manifest["exporter"]["engines"][0]["version"] = "0.26.0"  # only the exporter saw the version
    auto.manifest["exporter"]["gpus"] = [{"name": "NVIDIA H200"}, {"name": "NVIDIA H200"}]
    row = csv_row(auto.manifest, auto.summary, Path("/nonexistent"))
    assert row["max_num_seqs"] == 64  # was "auto": the raw engine.params value
    assert (row["engine"], row["engine_version"]) == ("vllm", "0.26.0")
    assert (row["gpu_name"], row["gpu_count"]) == ("NVIDIA H200", 2)
    facts = run_facts(auto.manifest, auto.summary)
    assert (facts.params["max_num_seqs"], facts.engine, facts.version) == (64, "vllm", "0.26.0")
    unknown = record(None, "unknown (no launch flags, no server info)", exporter_value=None)
    assert csv_row(unknown.manifest, unknown.summary, Path("/x"))["max_num_seqs"] is None


def test_the_model_is_the_one_the_requests_asked_for_in_the_csv_and_the_diff() -> None:
    """A server listing two models, the run sent to the second (`--model b`): both say `b`."""
    run = record(64, "launch flag", exporter_value=None)
    run.manifest["engine"]["model"] = "a"  # the engine's first listed model
    run.manifest["config"] = {"model": "b"}
    assert csv_row(run.manifest, {"model": "b"}, Path("/x"))["model"] == "b"
    assert run_facts(run.manifest, {}).model == "b"
