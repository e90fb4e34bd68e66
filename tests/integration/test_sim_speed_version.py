"""A controlled regression from the simulated engine (issue #12 item 7): `--speed-factor` slows every
step, `--version` changes the version it reports, both reachable as `loadgen --target sim --sim-X`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from click.testing import CliRunner

from loadgen.cli.main import cli
from simengine.embedded import EmbeddedEngine

SLOWER = 1.15  # the regression the baseline end-to-end test plants: TPOT 15% worse


def _loadgen_run(results: Path, *sim_flags: str) -> dict[str, Any]:
    """One `loadgen --target sim` run at the real step times (time scale 1); its summary and manifest."""
    args = ["run", "--target", "sim", "--num-prompts", "16", "--max-concurrency", "4", "--profile", "short"]
    args += ["--seed", "5", "--metrics-port", "0", "--linger", "0", "--quiet", "--json"]
    args += ["--results-dir", str(results), "--sim-time-scale", "1", *sim_flags]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    manifest = json.loads((results / summary["run_id"] / "manifest.json").read_text())
    return {"summary": summary, "manifest": manifest}


@pytest.fixture(scope="module")
def base_and_slower(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, dict]:
    results = tmp_path_factory.mktemp("results")
    base = _loadgen_run(results)
    slower = _loadgen_run(results, "--sim-speed-factor", str(SLOWER), "--sim-version", "0.27.0")
    return base, slower


def test_speed_factor_makes_the_tpot_loadgen_measures_that_much_higher(base_and_slower) -> None:
    base, slower = base_and_slower
    ratio = slower["summary"]["tpot_s"]["p50"] / base["summary"]["tpot_s"]["p50"]
    # every step lasts 1.15x as long; loop and parsing overheads (not scaled) pull the ratio a little
    # under 1.15. An ignored factor gives 1.00 +- noise, far below the lower bound.
    assert 1.08 < ratio < 1.22, ratio
    assert slower["summary"]["requests"]["ok"] == base["summary"]["requests"]["ok"] == 16


def test_version_flag_changes_the_version_loadgen_records(base_and_slower) -> None:
    base, slower = base_and_slower
    assert base["manifest"]["engine"]["version"] == "0.33.0+sim"  # the simulator's default
    assert slower["manifest"]["engine"]["version"] == "0.27.0"
    assert "--speed-factor" in slower["manifest"]["config"]["sim_args"]


async def _get(url: str) -> Any:
    async with aiohttp.ClientSession() as session, session.get(url) as resp:
        assert resp.status == 200, url
        return await resp.json()


async def test_every_metadata_endpoint_reports_the_given_version() -> None:
    with (
        EmbeddedEngine(["--version", "0.27.0"]) as vllm,
        EmbeddedEngine(["--personality", "sglang", "--engine-version", "0.5.20"]) as sglang,
    ):
        assert (await _get(vllm.base_url + "/version")) == {"version": "0.27.0"}
        info = await _get(vllm.base_url + "/server_info")
        assert info["system_env"]["vllm_version"] == "0.27.0"
        for path in ("/get_server_info", "/server_info"):
            assert (await _get(sglang.base_url + path))["version"] == "0.5.20"
