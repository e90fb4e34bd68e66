"""Issue 10, done-when 2 (defect 2): `align --check` on the simulated vLLM (with /server_info) and
the simulated SGLang, both 64 running requests, names each engine and only true differences.

Before, SGLang's adapter was tried first and fell back to /server_info, which the vLLM answers
too: A was reported as `sglang`, version None, every parameter None, 12 false differences.
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from loadgen.cli.align import align
from simengine.embedded import EmbeddedEngine


def _rows(output: str) -> dict[str, list[str]]:
    rows = {}
    for line in output.splitlines():
        cells = [c.strip() for c in line.split("|") if c.strip()] if "|" in line else line.split()
        if cells:
            rows[cells[0]] = cells
    return rows


def test_align_check_names_each_engine_and_only_true_differences(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VLLM_SERVER_DEV_MODE", "1")  # the simulated vLLM serves /server_info
    with (
        EmbeddedEngine(["--personality", "vllm", "--max-num-seqs", "64"]) as vllm_sim,
        EmbeddedEngine(["--personality", "sglang", "--max-running-requests", "64"]) as sglang_sim,
    ):
        result = CliRunner().invoke(align, ["--check", vllm_sim.base_url, sglang_sim.base_url])
    out = result.stdout
    assert f"A: {vllm_sim.base_url} (vllm " in out, out
    assert f"B: {sglang_sim.base_url} (sglang " in out, out
    rows = _rows(out)
    assert "max_num_seqs" not in rows  # both run 64
    assert "tensor_parallel_size" not in rows
    # SGLang's dtype 'auto' (its model's dtype) is undecided over HTTP: a warning, not a difference
    assert "dtype" not in rows
    assert "warning: dtype is 'auto'" in out
    differing = [name for name in rows if name in ("engine", "block_size", "seed", "gpu_memory_utilization")]
    assert "engine" in differing
    for name, cells in rows.items():
        if name in ("engine", "version", "model", "max_model_len") or len(cells) != 3:
            continue
        assert "None" not in cells[1:], (name, cells)  # a parameter one side did not report is no difference
    assert result.exit_code == 1
