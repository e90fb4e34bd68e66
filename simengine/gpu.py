"""GPU profiles and the roofline model that turns one scheduler step into a duration.

Per step, with P parameters, b bytes per weight, TP degree t, batch of prefill + decode tokens n:

- memory time   t_mem  = (P*b + KV_read + KV_write) / t / (HBM_bandwidth * MEM_EFFICIENCY)
  where KV_read = sum of every scheduled sequence's context length * kv_bytes_per_token
  (decode is memory-bound: the whole model and every running sequence's KV cache are read once).
- compute time  t_comp = (2*P*n + 4*L*d*sum(attended context per new token)) / t / (peak_FLOPs * MFU)
  (prefill is FLOP-bound: 2 FLOPs per parameter per token, plus attention over the context).
- all-reduce    t_ar   = 2*L * (latency + 2*(t-1)/t * n*d*b / link_bandwidth) when t > 1
  (two all-reduces per layer, ring algorithm, over NVLink or PCIe).
- step          t_step = (max(t_mem, t_comp) + t_ar + step_overhead) * speed_factor
  (speed_factor 1 by default; 1.15 makes every step, so TPOT and ITL, 15% slower: a controlled
  regression for testing baselines).

Figures are datasheet peaks (dense, no sparsity); efficiencies are typical achieved fractions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MEM_EFFICIENCY = 0.80  # achieved / peak HBM bandwidth for large reads
MFU = 0.55  # achieved / peak tensor FLOPs for prefill GEMMs
LINK_EFFICIENCY = 0.85  # achieved / peak interconnect bandwidth for all-reduce
INTERCONNECTS = ("nvlink", "pcie")
ALLREDUCE_LATENCY_S = {"nvlink": 8e-6, "pcie": 8.5e-6}  # per all-reduce launch + sync
DTYPE_BYTES = {
    "bf16": 2.0,
    "fp16": 2.0,
    "auto": 2.0,
    "bfloat16": 2.0,
    "float16": 2.0,
    "half": 2.0,
    "float": 4.0,
    "float32": 4.0,
    "fp8": 1.0,
}
RESERVED_BYTES = 4 * 2**30  # activations, CUDA graphs, allocator slack kept out of the KV cache


@dataclass(frozen=True)
class GpuProfile:
    """Datasheet figures of one GPU (per GPU, dense)."""

    name: str
    bf16_tflops: float
    fp8_tflops: float  # 0 where the GPU has no FP8 tensor cores (then FP8 runs at bf16 speed)
    hbm_tbps: float
    memory_gib: float
    nvlink_gbps: float  # per direction, per GPU; 0 = no NVLink
    pcie_gbps: float  # per direction, x16 slot


GPU_PROFILES: dict[str, GpuProfile] = {
    "h200": GpuProfile("NVIDIA H200", 989.0, 1979.0, 4.8, 141.0, 450.0, 64.0),
    "h100": GpuProfile("NVIDIA H100 80GB HBM3", 989.0, 1979.0, 3.35, 80.0, 450.0, 64.0),
    "a100": GpuProfile("NVIDIA A100-SXM4-80GB", 312.0, 0.0, 2.039, 80.0, 300.0, 32.0),
    "l40s": GpuProfile("NVIDIA L40S", 362.0, 733.0, 0.864, 48.0, 0.0, 32.0),
}


@dataclass(frozen=True)
class ModelShape:
    """Llama-style transformer shape: layers, hidden size, KV heads, head dimension."""

    params: float
    layers: int
    hidden: int
    kv_heads: int
    head_dim: int


_SHAPES = (
    ModelShape(1e9, 16, 2048, 8, 64),
    ModelShape(3e9, 28, 3072, 8, 128),
    ModelShape(8e9, 32, 4096, 8, 128),
    ModelShape(14e9, 48, 5120, 8, 128),
    ModelShape(32e9, 64, 5120, 8, 128),
    ModelShape(70e9, 80, 8192, 8, 128),
)


def model_shape(params: float) -> ModelShape:
    """The Llama-family shape nearest (in log size) to `params`."""
    best = min(_SHAPES, key=lambda s: abs(math.log(s.params) - math.log(params)))
    return ModelShape(params, best.layers, best.hidden, best.kv_heads, best.head_dim)


def kv_bytes_per_token(params: float, dtype: str) -> float:
    """KV-cache bytes per token: 2 (K and V) * layers * kv_heads * head_dim * bytes per element."""
    s = model_shape(params)
    return 2.0 * s.layers * s.kv_heads * s.head_dim * DTYPE_BYTES[dtype]


def default_kv_cache_tokens(gpu: str, params: float, dtype: str, tp: int, mem_util: float) -> int:
    """Tokens that fit: (memory * utilisation - weights/tp - reserve) / (KV bytes per token / tp)."""
    prof = GPU_PROFILES[gpu]
    budget = prof.memory_gib * 2**30 * mem_util - params * DTYPE_BYTES[dtype] / tp - RESERVED_BYTES
    per_token = kv_bytes_per_token(params, dtype) / tp
    return max(0, int(budget // per_token))


@dataclass(frozen=True)
class StepModel:
    """Roofline step-time model for one engine configuration (see the module docstring)."""

    gpu: GpuProfile
    shape: ModelShape
    dtype_bytes: float
    flops_per_s: float
    tp: int
    link_bps: float
    link_latency_s: float
    overhead_s: float
    speed_factor: float = 1.0

    @classmethod
    def build(
        cls,
        gpu: str,
        params: float,
        dtype: str,
        tp: int,
        interconnect: str,
        overhead_ms: float,
        speed_factor: float = 1.0,
    ) -> StepModel:
        prof = GPU_PROFILES[gpu]
        tflops = prof.fp8_tflops if dtype == "fp8" and prof.fp8_tflops else prof.bf16_tflops
        link = prof.nvlink_gbps if interconnect == "nvlink" and prof.nvlink_gbps else prof.pcie_gbps
        return cls(
            prof,
            model_shape(params),
            DTYPE_BYTES[dtype],
            tflops * 1e12 * MFU,
            tp,
            link * 1e9 * LINK_EFFICIENCY,
            ALLREDUCE_LATENCY_S[interconnect],
            overhead_ms / 1e3,
            speed_factor,
        )

    @property
    def kv_bytes_per_token(self) -> float:
        s = self.shape
        return 2.0 * s.layers * s.kv_heads * s.head_dim * self.dtype_bytes

    def step_costs(self, new_tokens: int, context_tokens: int, attended: float) -> tuple[float, float, float]:
        """(FLOPs, bytes read, bytes written) of one step, per GPU (divided by the TP degree).

        new_tokens: tokens computed this step (prefill chunk tokens + one per decoding sequence);
        context_tokens: KV entries read (sum of the scheduled sequences' context lengths);
        attended: sum over new tokens of the context each attends to (attention FLOPs).
        """
        s = self.shape
        kvb = self.kv_bytes_per_token
        read = (s.params * self.dtype_bytes + context_tokens * kvb) / self.tp
        written = new_tokens * kvb / self.tp
        flops = (2.0 * s.params * new_tokens + 4.0 * s.layers * s.hidden * attended) / self.tp
        return flops, read, written

    def step_seconds(self, new_tokens: int, context_tokens: int, attended: float) -> float:
        """Duration of one step: (max(memory time, compute time) + all-reduce + overhead) * speed_factor."""
        if new_tokens <= 0:
            return 0.0
        flops, read, written = self.step_costs(new_tokens, context_tokens, attended)
        t_mem = (read + written) / (self.gpu.hbm_tbps * 1e12 * MEM_EFFICIENCY)
        t_comp = flops / self.flops_per_s
        step = max(t_mem, t_comp) + self.allreduce_seconds(new_tokens) + self.overhead_s
        return step * self.speed_factor

    def allreduce_seconds(self, new_tokens: int) -> float:
        """Two ring all-reduces per layer over the step's activations (0 without tensor parallelism)."""
        if self.tp <= 1:
            return 0.0
        nbytes = new_tokens * self.shape.hidden * self.dtype_bytes
        one = self.link_latency_s + 2.0 * (self.tp - 1) / self.tp * nbytes / self.link_bps
        return 2 * self.shape.layers * one

    def decode_step_seconds(self, batch: int, context: int) -> float:
        """A pure decode step: `batch` sequences of `context` tokens each produce one token."""
        return self.step_seconds(batch, batch * context, float(batch * context))
