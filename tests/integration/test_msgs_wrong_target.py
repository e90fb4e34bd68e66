"""Issue 22 item 11: `--target vllm --base-url <an SGLang>` recorded `engine vllm, version 0.5.23+sim`
silently. The engine is recognised from what its endpoints answer: a warning, and the record names
the engine that answered (`target_preset` keeps what --target said)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from loadgen.cli.main import cli
from simengine.embedded import EmbeddedEngine

pytestmark = pytest.mark.timeout(90)


def _run(target: str, base_url: str, results: Path) -> tuple[str, dict]:
    args = ["run", "--target", target, "--base-url", base_url, "--num-prompts", "3", "--profile", "short"]
    args += ["--metrics-port", "0", "--store", "none", "--quiet", "--results-dir", str(results)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    (run_dir,) = [p for p in results.iterdir() if p.is_dir()]
    return result.output, json.loads((run_dir / "manifest.json").read_text())


@pytest.mark.parametrize(("personality", "target"), [("sglang", "vllm"), ("vllm", "sglang")])
def test_msgs_wrong_target_is_warned_and_the_answering_engine_recorded(
    tmp_path: Path, personality: str, target: str
) -> None:
    with EmbeddedEngine(["--personality", personality]) as engine:
        output, manifest = _run(target, engine.base_url, tmp_path)
    warning = f"warning: --target {target} but {engine.base_url} answers as {personality} "
    assert warning in output, output
    assert f"recorded as engine {personality}" in output
    assert manifest["engine"]["engine"] == personality
    assert manifest["engine"]["target_preset"] == target
    assert manifest["config"]["target"] == target  # what the user asked stays in the config


def test_msgs_right_target_has_no_warning(tmp_path: Path) -> None:
    with EmbeddedEngine(["--personality", "sglang"]) as engine:
        output, manifest = _run("sglang", engine.base_url, tmp_path)
    assert "answers as" not in output
    assert manifest["engine"]["engine"] == "sglang"
    assert manifest["engine"]["target_preset"] is None
