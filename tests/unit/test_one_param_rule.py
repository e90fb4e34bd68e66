"""Issue #24 item 3 (in part): the series label of runs.csv and `loadgen report` and `loadgen diff`
read an engine parameter by one rule (loadgen.analysis.diff_facts.resolve_params): a recorded
`auto` or unknown value is no value, and the exporter's reading of the engine that served the run
fills it in."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from loadgen.analysis.diff import manifest_differences
from loadgen.analysis.series import series_label
from loadgen.results.rundir import RunRecord


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
