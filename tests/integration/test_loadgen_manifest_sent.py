"""Issue #11 item 19: the manifest records what was sent, not options the run never used."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from loadgen.cli.main import cli
from tests.loadgen_servers import FakeEngine, ServerThread

pytestmark = pytest.mark.timeout(60)


def _run(args: list[str], results: Path) -> dict:
    base = ["run", "--results-dir", str(results), "--metrics-port", "0", "--linger", "0", "--quiet"]
    result = CliRunner().invoke(cli, [*base, "--num-prompts", "3", *args])
    assert result.exit_code == 0, result.output
    (manifest,) = results.glob("*/manifest.json")
    return json.loads(manifest.read_text())


def _dataset(tmp_path: Path, records: list[dict]) -> Path:
    path = tmp_path / "d.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_item19_jsonl_run_records_no_input_len_and_no_unused_output_len(tmp_path: Path) -> None:
    path = _dataset(tmp_path, [{"prompt": "one two", "output_len": 3}, {"prompt": "three", "max_tokens": 2}])
    manifest = _run(["--target", "sim", "--dataset", str(path)], tmp_path / "r")
    config, workload = manifest["config"], manifest["workload"]
    assert (config["workload"], config["input_len"], config["output_len"]) == ("jsonl", None, None)
    assert workload["output_len"] is None
    assert config["shared_prefix_len"] is None
    assert config["ignore_eos"] is True  # the simulated engine takes it, and it was sent


def test_item19_jsonl_output_len_is_recorded_when_it_was_drawn(tmp_path: Path) -> None:
    path = _dataset(tmp_path, [{"prompt": "one two", "output_len": 3}, {"prompt": "no length"}])
    manifest = _run(["--target", "sim", "--dataset", str(path), "--output-len", "fixed:5"], tmp_path / "r")
    assert manifest["config"]["input_len"] is None
    assert manifest["config"]["output_len"] == manifest["workload"]["output_len"] == "fixed:5"


def test_item19_openai_target_records_ignore_eos_false_as_sent(tmp_path: Path) -> None:
    engine = FakeEngine(ttft_s=0.001, itl_s=0.0)
    with ServerThread(engine.app) as server:
        args = ["--target", "openai", "--base-url", server.base_url, "--output-len", "fixed:2"]
        manifest = _run(args, tmp_path / "r")
    assert engine.streams
    assert not any("ignore_eos" in s.body for s in engine.streams)
    assert manifest["config"]["ignore_eos"] is False
    assert manifest["config"]["input_len"] == manifest["workload"]["input_len"] == "fixed:512"


def test_item19_vllm_target_records_ignore_eos_true_as_sent(tmp_path: Path) -> None:
    engine = FakeEngine(ttft_s=0.001, itl_s=0.0)
    with ServerThread(engine.app) as server:
        args = ["--target", "vllm", "--base-url", server.base_url, "--output-len", "fixed:2"]
        manifest = _run(args, tmp_path / "r")
    assert all(s.body.get("ignore_eos") is True for s in engine.streams)
    assert manifest["config"]["ignore_eos"] is True
