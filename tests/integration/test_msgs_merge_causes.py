"""Issue 22 item 10: `loadgen merge` of shard records with a cut requests.jsonl or a missing
summary.json names that cause (before: `sent 2 of its 20`, `holds no run record (manifest.json)`),
and the shard without a summary is still merged (nothing lost), against the real simulated engine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from loadgen.cli.main import cli
from simengine.embedded import EmbeddedEngine

pytestmark = pytest.mark.timeout(120)
RUN_ID = "20261201T000000Z-abcdef"


def _shards(tmp_path: Path) -> list[Path]:
    dirs = []
    with EmbeddedEngine(["--personality", "vllm"]) as engine:
        for index in (0, 1):
            results = tmp_path / f"shard{index}"
            args = ["run", "--target", "vllm", "--base-url", engine.base_url, "--shard", f"{index}/2"]
            args += ["--run-id", RUN_ID, "--num-prompts", "20", "--profile", "short", "--rate", "200"]
            args += ["--metrics-port", "0", "--store", "none", "--quiet", "--results-dir", str(results)]
            result = CliRunner().invoke(cli, args)
            assert result.exit_code == 0, result.output
            dirs.append(results / RUN_ID)
    return dirs


def _merge(dirs: list[Path], out: Path) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["merge", *map(str, dirs), "--results-dir", str(out)])
    return result.exit_code, result.output


def test_msgs_merge_cut_journal_and_missing_summary_name_their_causes(tmp_path: Path) -> None:
    first, second = _shards(tmp_path)
    journal = first / "requests.jsonl"
    lines = journal.read_bytes().splitlines(keepends=True)
    assert len(lines) == 10
    journal.write_bytes(b"".join(lines[:4]) + lines[4][:30])  # cut mid-line after 4 whole lines
    (second / "summary.json").unlink()

    code, output = _merge([first, second], tmp_path / "merged")

    assert code == 1, output  # merged, partial
    assert "0 requests.jsonl holds 4 of the 10 requests its summary counts (the file was cut)" in output
    assert (
        "1 partial: summary.json missing (manifest status 'complete'); rebuilt from requests.jsonl" in output
    )
    assert "holds no run record" not in output
    assert "sent 4 of its" not in output
    summary = json.loads((tmp_path / "merged" / RUN_ID / "summary.json").read_text())
    assert summary["partial"] is True
    assert summary["requests"]["total"] == 14  # 4 kept of shard 0, all 10 of shard 1


def test_msgs_merge_without_manifest_names_the_manifest(tmp_path: Path) -> None:
    empty = tmp_path / "nothing"
    empty.mkdir()
    code, output = _merge([empty], tmp_path / "merged")
    assert code == 2
    assert output.strip() == f"Error: {str(empty)!r} holds no run record (no manifest.json)"
