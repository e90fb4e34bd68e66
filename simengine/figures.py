"""`python -m simengine.figures`: the model's headline curves on the virtual clock (README figures).

Closed-loop clients, 512-token prompts, 256 output tokens (the seed's "medium" profile), 60 s of
model time after 5 s of warm-up; nothing here depends on this machine's speed.
"""

from __future__ import annotations

from simengine.config import parse_args
from simengine.virtual import random_prompt, run_closed_loop

CONCURRENCY = (1, 8, 16, 32, 64, 128, 256)
SEED_LOSS = {1: 2.8, 8: 15.2, 16: 22.9, 32: 32.3, 64: 36.4}  # seed table 3.3, A100 x4, 14B, TP4


def _run(flags: list[str], concurrency: int) -> tuple[float, float]:
    r = run_closed_loop(
        parse_args(flags),
        concurrency=concurrency,
        prompt=random_prompt(1, 512),
        output_len=256,
        duration_s=60,
        warmup_s=5,
    )
    return r.output_tokens_per_s, r.ttft_p99_s


def throughput_table() -> list[str]:
    """Default engine (H200, 8B, bf16, max-num-seqs 256): output tokens/s and TTFT p99 by concurrency."""
    rows = ["| concurrency | output tokens/s | TTFT p99 (s) |", "| ---: | ---: | ---: |"]
    for c in (*CONCURRENCY, 512):
        tps, ttft = _run([], c)
        rows.append(f"| {c} | {tps:,.0f} | {ttft:.3f} |")
    return rows


def interconnect_table() -> list[str]:
    """A100 x4, 14B, TP4: throughput lost on PCIe versus NVLink, next to the seed's table."""
    base = ["--gpu", "a100", "--model-params", "14e9", "--tp", "4"]
    rows = [
        "| concurrency | NVLink tokens/s | PCIe tokens/s | loss (model) | loss (seed 3.3) |",
        "| ---: | ---: | ---: | ---: | ---: |",
    ]
    for c, seed in SEED_LOSS.items():
        nv, _ = _run([*base, "--interconnect", "nvlink"], c)
        pcie, _ = _run([*base, "--interconnect", "pcie"], c)
        rows.append(f"| {c} | {nv:,.0f} | {pcie:,.0f} | {100 * (1 - pcie / nv):.1f}% | {seed}% |")
    return rows


def main() -> None:
    print("\n".join(throughput_table()))
    print()
    print("\n".join(interconnect_table()))


if __name__ == "__main__":
    main()
