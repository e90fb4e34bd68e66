"""The behaviour model's qualitative facts (seed sections 3 and 6), on the scheduler's virtual clock."""

from __future__ import annotations

import pytest

from simengine.config import parse_args
from simengine.gpu import GPU_PROFILES, StepModel, kv_bytes_per_token
from simengine.virtual import random_prompt, run_closed_loop, run_open_loop, shared_prefix_prompt


def test_decode_step_is_memory_bound_and_prefill_is_flop_bound() -> None:
    m = StepModel.build("h200", 8e9, "bf16", 1, "nvlink", 0.0)
    # decode, batch 1: 16 GB of weights / (4.8 TB/s * 0.8) = 4.2 ms, FLOPs negligible
    assert m.decode_step_seconds(1, 100) == pytest.approx(16e9 / (4.8e12 * 0.8), rel=0.02)
    # prefill of 8192 tokens: 2 * 8e9 * 8192 FLOPs / (989 TFLOP/s * 0.55) = 241 ms, well above memory time
    t = m.step_seconds(8192, 0, 8192 * 8193 / 2)
    assert t > 2 * 16e9 / (4.8e12 * 0.8)
    assert t == pytest.approx((2 * 8e9 * 8192 + 4 * 32 * 4096 * 8192 * 8193 / 2) / (989e12 * 0.55), rel=0.02)


def test_kv_read_makes_long_contexts_slower() -> None:
    m = StepModel.build("h200", 8e9, "bf16", 1, "nvlink", 0.0)
    assert m.decode_step_seconds(64, 4096) > m.decode_step_seconds(64, 256)
    assert kv_bytes_per_token(8e9, "bf16") == 2 * 32 * 8 * 128 * 2  # Llama-3-8B: 128 KiB per token


def test_allreduce_only_with_tensor_parallelism_and_pcie_costs_more() -> None:
    assert StepModel.build("a100", 14e9, "bf16", 1, "pcie", 0.0).allreduce_seconds(64) == 0.0
    nv = StepModel.build("a100", 14e9, "bf16", 4, "nvlink", 0.0).allreduce_seconds(64)
    pcie = StepModel.build("a100", 14e9, "bf16", 4, "pcie", 0.0).allreduce_seconds(64)
    assert 0 < nv < pcie


def test_speed_factor_multiplies_every_step_and_reaches_the_virtual_clock() -> None:
    base = StepModel.build("h200", 8e9, "bf16", 2, "nvlink", 1.0)
    slower = StepModel.build("h200", 8e9, "bf16", 2, "nvlink", 1.0, speed_factor=1.15)
    for step in (
        (1, 100, 100.0),
        (64, 64 * 2048, 64 * 2048.0),
        (8192, 0, 8192 * 8193 / 2),
    ):  # decode..prefill
        assert slower.step_seconds(*step) == pytest.approx(1.15 * base.step_seconds(*step), rel=1e-12)
    # the closed-loop figures the scheduler produces (model time) follow: throughput / 1.15
    prompt = random_prompt(1, 128)
    fast = run_closed_loop(parse_args([]), concurrency=8, prompt=prompt, output_len=64, duration_s=5)
    slow_cfg = parse_args(["--speed-factor", "1.15"])
    slow = run_closed_loop(slow_cfg, concurrency=8, prompt=prompt, output_len=64, duration_s=5)
    assert slow.output_tokens_per_s == pytest.approx(fast.output_tokens_per_s / 1.15, rel=0.03)


def test_gpu_profiles_rank_by_memory_bandwidth() -> None:
    order = sorted(
        GPU_PROFILES, key=lambda g: StepModel.build(g, 8e9, "bf16", 1, "pcie", 0.0).decode_step_seconds(1, 1)
    )
    assert order == ["h200", "h100", "a100", "l40s"]


def _throughput(concurrency: int, *flags: str) -> float:
    cfg = parse_args(list(flags))
    return run_closed_loop(
        cfg, concurrency=concurrency, prompt=random_prompt(1, 512), output_len=128, duration_s=20, warmup_s=3
    ).output_tokens_per_s


def test_throughput_rises_with_concurrency_then_saturates() -> None:
    flags = ("--max-num-seqs", "64")
    t = {c: _throughput(c, *flags) for c in (1, 8, 32, 64, 256)}
    assert t[1] < t[8] < t[32] < t[64]
    assert t[8] > 4 * t[1]  # batching is nearly free while decode is memory-bound
    assert t[256] == pytest.approx(t[64], rel=0.05)  # past max_num_seqs: no more throughput


def test_ttft_grows_without_bound_past_the_knee() -> None:
    cfg = parse_args(["--max-num-seqs", "32"])
    prompt = random_prompt(2, 256)
    capacity = run_closed_loop(
        cfg, concurrency=32, prompt=prompt, output_len=128, duration_s=20
    ).requests_per_s
    below = [
        run_open_loop(cfg, rate=0.5 * capacity, prompt=prompt, output_len=128, duration_s=d).ttft_mean_s
        for d in (20, 40)
    ]
    above = [
        run_open_loop(cfg, rate=1.5 * capacity, prompt=prompt, output_len=128, duration_s=d).ttft_mean_s
        for d in (20, 40)
    ]
    assert below[1] == pytest.approx(below[0], rel=0.5)
    assert below[1] < 0.5
    assert above[0] > 10 * below[0]  # queueing past the knee
    assert above[1] > 1.6 * above[0]  # and it keeps growing the longer the overload lasts


def test_shared_prefix_ttft_is_lower_with_prefix_caching() -> None:
    prompt_on = shared_prefix_prompt(3, 1536, 64)
    prompt_off = shared_prefix_prompt(3, 1536, 64)
    on = run_closed_loop(parse_args([]), concurrency=16, prompt=prompt_on, output_len=64, duration_s=10)
    off = run_closed_loop(
        parse_args(["--no-enable-prefix-caching"]),
        concurrency=16,
        prompt=prompt_off,
        output_len=64,
        duration_s=10,
    )
    assert on.ttft_mean_s < 0.7 * off.ttft_mean_s


def test_pcie_loses_more_throughput_than_nvlink_as_concurrency_grows() -> None:
    """Seed table 3.3 (A100 x4, 14B, TP4, 512/256): loss ~2.8% at 1 -> ~36% at 64."""
    base = ("--gpu", "a100", "--model-params", "14e9", "--tp", "4")
    loss = {}
    for c in (1, 8, 64):
        nv, pcie = (_throughput(c, *base, "--interconnect", ic) for ic in ("nvlink", "pcie"))
        loss[c] = 1 - pcie / nv
    assert 0.0 < loss[1] < 0.08
    assert loss[1] < loss[8] < loss[64]
    assert 0.25 < loss[64] < 0.50
