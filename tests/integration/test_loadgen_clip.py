"""Issue 11 item 11: a long-tailed workload is clipped to the engine's max_model_len (no HTTP 400),
the run records how many requests were clipped, and the clip is deterministic."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from loadgen.cli.main import cli
from loadgen.config import RunConfig
from loadgen.workload.generator import SyntheticWorkload

pytestmark = pytest.mark.timeout(90)
MODEL_LEN = 512


def _run(tmp_path: Path, *extra: str) -> tuple[dict, dict]:
    args = ["--target", "sim", "--sim-max-model-len", str(MODEL_LEN), "--input-len", "lognormal:400,1"]
    args += ["--output-len", "fixed:32", "--num-prompts", "40", "--seed", "3", "--metrics-port", "0"]
    result = CliRunner().invoke(
        cli, [*args, *extra, "--results-dir", str(tmp_path), "--sim-time-scale", "50"]
    )
    assert result.exit_code == 0, result.output
    (run_dir,) = [p for p in tmp_path.iterdir() if (p / "manifest.json").exists()]
    return json.loads((run_dir / "manifest.json").read_text()), json.loads(
        (run_dir / "summary.json").read_text()
    )


def test_long_tail_is_clipped_to_the_model_length(tmp_path: Path) -> None:
    manifest, summary = _run(tmp_path)
    assert summary["requests"]["failed"] == 0  # no HTTP 400 "maximum context length"
    workload = manifest["workload"]
    assert workload["clipped_to_max_model_len"] == MODEL_LEN
    # lognormal with median 400 and sigma 1: about 4 in 10 draws exceed 512 - 32
    assert workload["clipped_requests"] > 0
    lines = [json.loads(x) for x in _lines(tmp_path)]
    assert max(line["input_len"] + line["output_len"] for line in lines) <= MODEL_LEN


def _lines(tmp_path: Path) -> list[str]:
    (path,) = tmp_path.glob("*/requests.jsonl")
    return path.read_text().splitlines()


def _workload(max_model_len: int | None) -> SyntheticWorkload:
    config = RunConfig(target="sim", input_len="lognormal:400,1", output_len="fixed:32", seed=3)
    workload = SyntheticWorkload(config)
    workload.clip_to_model_len(max_model_len)
    return workload


def test_the_clip_is_a_function_of_the_definition_and_the_model_length() -> None:
    one, two, unclipped = _workload(MODEL_LEN), _workload(MODEL_LEN), _workload(None)
    assert [one.request(i) for i in range(50)] == [two.request(i) for i in range(50)]
    assert one.describe()["definition_fingerprint"] == two.describe()["definition_fingerprint"]
    assert one.describe()["definition_fingerprint"] != unclipped.describe()["definition_fingerprint"]
    for i in range(50):
        drawn, clipped = unclipped.request(i), one.request(i)
        assert clipped.input_len + clipped.output_len <= MODEL_LEN
        assert (drawn == clipped) is (i not in one.clipped)


def test_bounded_lengths_that_fit_are_not_clipped() -> None:
    config = RunConfig(target="sim", input_len="uniform:10-400", output_len="fixed:100", seed=3)
    workload = SyntheticWorkload(config)
    workload.clip_to_model_len(MODEL_LEN)
    assert workload.clip_to is None  # 400 + 100 always fits: the definition is unchanged
    assert "clipped_to_max_model_len" not in workload.describe()
