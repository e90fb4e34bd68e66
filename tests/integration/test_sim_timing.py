"""The real-time step loop follows the roofline model: inter-token gaps equal the modelled step time."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from aiohttp.test_utils import TestClient, TestServer

from simengine.app import build_app
from simengine.config import parse_args
from simengine.gpu import StepModel


async def _gaps_ms(tmp_path: Path, *flags: str) -> tuple[float, float]:
    truth = tmp_path / "gt.jsonl"
    cfg = parse_args(["--ground-truth", str(truth), "--ground-truth-tokens", *flags])
    client = TestClient(TestServer(build_app(cfg), host="127.0.0.1", port=0))
    await client.start_server()
    try:
        resp = await client.post(
            "/v1/completions",
            json={"prompt": list(range(2, 130)), "max_tokens": 40, "ignore_eos": True, "stream": True},
        )
        await resp.read()
    finally:
        await client.close()
    sends = json.loads(truth.read_text().splitlines()[0])["token_send_ns"]
    gaps = [(b - a) / 1e6 for a, b in zip(sends, sends[1:], strict=False)]
    model = StepModel.build(
        cfg.gpu, cfg.model_params, cfg.dtype, cfg.tensor_parallel_size, cfg.interconnect, cfg.step_overhead_ms
    )
    expected = model.decode_step_seconds(1, 150) * 1e3 / cfg.time_scale
    return statistics.median(gaps), expected


def _close(measured_ms: float, expected_ms: float) -> bool:
    """Within 1.5 ms or 20% (a loaded CI machine can delay the odd step; the median absorbs most)."""
    return abs(measured_ms - expected_ms) < max(1.5, 0.2 * expected_ms)


async def test_inter_token_gap_is_the_models_decode_step(tmp_path: Path) -> None:
    measured, expected = await _gaps_ms(tmp_path)  # H200, 8B, bf16: ~5.2 ms per decode step
    assert _close(measured, expected), (measured, expected)


async def test_slower_gpu_profile_gives_longer_steps_and_time_scale_divides(tmp_path: Path) -> None:
    l40s, expected_l40s = await _gaps_ms(tmp_path / "a", "--gpu", "l40s", "--model-params", "3e9")
    scaled, expected_scaled = await _gaps_ms(
        tmp_path / "b", "--gpu", "l40s", "--model-params", "3e9", "--time-scale", "4"
    )
    assert _close(l40s, expected_l40s), (l40s, expected_l40s)
    assert _close(scaled, expected_scaled), (scaled, expected_scaled)
    assert scaled < l40s / 3
