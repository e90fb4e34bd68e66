"""Issue 22 items 12, 17-19: a fact loadgen could not read is unknown, never a default or `auto`.

- 19: vLLM states its effective `gpu_memory_utilization`, `block_size` and prefix caching in
  `vllm:cache_config_info` on /metrics; the metadata fetch reads it (golden vLLM 0.26.0 capture,
  served on loopback) and says the source.
- 12/18: without an exporter or dev-mode /server_info, vLLM's `max_num_seqs` is unknown (None, source
  `unknown ...`), not `auto`; a run warns on the console; `loadgen diff` never ranks an unknown or
  `auto` value above a known difference.
- 17: the run says which exporter it attached, or that none was (facts missing).
"""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from click.testing import CliRunner

from loadgen.analysis.diff import manifest_differences
from loadgen.cli.main import cli
from loadgen.results.manifest import engine_section
from loadgen.targets import get_target
from simengine.embedded import EmbeddedEngine
from tests.conftest import GOLDEN_VLLM
from tests.loadgen_servers import serve

pytestmark = pytest.mark.timeout(90)
CACHE_CONFIG = "engine HTTP /metrics vllm:cache_config_info"


def _capture(name: str) -> tuple[str, str]:
    """(content type, body) of a captured HTTP answer."""
    head, _, body = (GOLDEN_VLLM / name).read_text().partition("\n\n")
    kind = "application/json" if "application/json" in head else "text/plain"
    return kind, body


def _answer(text: str, kind: str):  # noqa: ANN202 - an aiohttp handler
    async def handler(_request: web.Request) -> web.Response:
        return web.Response(text=text, content_type=kind)

    return handler


def _golden_vllm() -> web.Application:
    """vLLM 0.26.0 outside dev mode: /version, /v1/models and /metrics as captured (no /server_info)."""
    app = web.Application()
    for route, name in (
        ("/version", "get_version.txt"),
        ("/v1/models", "get_v1_models.txt"),
        ("/metrics", "metrics_0_idle.txt"),
    ):
        kind, body = _capture(name)
        app.router.add_get(route, _answer(body, kind))
    return app


async def test_msgs_unknown_facts_vllm_cache_config_info_is_read_from_metrics() -> None:
    async with serve(_golden_vllm()) as url, aiohttp.ClientSession() as session:
        meta = await get_target("vllm").fetch_metadata(session, url)
    section = engine_section(meta, url)
    params, sources = section["params"], section["param_sources"]
    # the capture's vLLM ran --gpu-memory-utilization 0.5 (the default would read 0.9)
    assert (params["gpu_memory_utilization"], sources["gpu_memory_utilization"]) == (0.5, CACHE_CONFIG)
    assert (params["block_size"], sources["block_size"]) == (16, CACHE_CONFIG)
    assert (params["prefix_caching"], sources["prefix_caching"]) == (True, CACHE_CONFIG)
    # its launch flags were not read: max_num_seqs is unknown, not 'auto' and not a default
    assert params["max_num_seqs"] is None
    assert sources["max_num_seqs"].startswith("unknown")


def test_msgs_unknown_facts_are_warned_and_no_exporter_is_said(tmp_path: Path) -> None:
    with EmbeddedEngine(["--personality", "vllm", "--no-dev-mode", "--max-num-seqs", "64"]) as engine:
        args = ["run", "--target", "vllm", "--base-url", engine.base_url, "--num-prompts", "2"]
        args += ["--profile", "short", "--exporter-url", "http://127.0.0.1:1", "--metrics-port", "0"]
        result = CliRunner().invoke(
            cli, [*args, "--store", "none", "--quiet", "--results-dir", str(tmp_path)]
        )
    assert result.exit_code == 0, result.output
    assert "warning: no exporter attached (http://127.0.0.1:1/manifest: " in result.output
    (line,) = [x for x in result.output.splitlines() if x.startswith("warning: engine facts unknown: ")]
    assert "max_num_seqs" in line
    assert "gpu_memory_utilization" not in line  # read from vllm:cache_config_info


def _manifest(engine: str, params: dict, sources: dict, server_args: dict | None = None) -> dict:
    return {
        "engine": {
            "engine": engine,
            "version": "1",
            "model": "m",
            "base_url": "http://127.0.0.1:8000",
            "params": params,
            "param_sources": sources,
            "server_args": server_args or {},
        },
        "config": {"endpoint": "completions"},
    }


def test_msgs_unknown_facts_never_outrank_a_known_difference() -> None:
    # an old record of a default vLLM without exporter: max_num_seqs 'auto' filled from the default
    vllm = _manifest(
        "vllm",
        {"max_num_seqs": "auto", "gpu_memory_utilization": 0.9, "dtype": "auto", "block_size": 16},
        {
            "max_num_seqs": "default",
            "gpu_memory_utilization": "default",
            "dtype": "default",
            "block_size": CACHE_CONFIG,
        },
    )
    sglang = _manifest(
        "vllm",
        {"max_num_seqs": 64, "gpu_memory_utilization": 0.5, "dtype": "bfloat16", "block_size": 1},
        {
            k: "engine HTTP /get_server_info"
            for k in ("max_num_seqs", "gpu_memory_utilization", "dtype", "block_size")
        },
        {"max_running_requests": 64},
    )
    summary = {"requests": {"ok": 10}, "total_input_tokens": 100, "total_output_tokens": 100}
    diffs = manifest_differences(vllm, sglang, summary, summary)
    params = [d.key for d in diffs if d.group == "params"]
    assert params == ["engine.params.block_size"]  # the one difference both runs know
    assert "engine.params.max_num_seqs" not in [d.key for d in diffs]  # 'auto' vs 64 is no cause
    unrecorded = next(d for d in diffs if d.key == "engine.params.unrecorded")
    assert {d.key for d in unrecorded.details} >= {"engine.params.max_num_seqs", "engine.params.dtype"}
    keys = [d.key for d in diffs]
    assert keys.index("engine.params.block_size") < keys.index("engine.params.unrecorded")
