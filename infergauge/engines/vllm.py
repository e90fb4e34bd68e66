"""vLLM (0.26, V1 engine) as data: flags and defaults, processes, endpoints, metric names.

Defaults follow `EngineArgs` (OpenAI API server context): `max_num_seqs` / `max_num_batched_tokens`
are 1024 / 8192 on GPUs with >= 70 GiB that are not A100s, else 256 / 2048 (`get_batch_defaults`).
Metric names are the ones in the golden capture (tests/fixtures/golden/vllm-0.26.0/metrics_*.txt).
"""

from __future__ import annotations

from infergauge.engines.base import AUTO, EngineSpec, GpuDefault, InfoMetric, Marker, ServerInfo, Value, flag
from infergauge.engines.metrics import counter, gauge, histogram, info

FLAGS = {
    "tensor_parallel_size": flag("tensor_parallel_size", int, "-tp"),
    "max_num_seqs": flag("max_num_seqs", int),
    "gpu_memory_utilization": flag("gpu_memory_utilization", float),
    "max_model_len": flag("max_model_len", int),
    "block_size": flag("block_size", int),
    "chunked_prefill": flag("enable_chunked_prefill", bool, negation="--no-enable-chunked-prefill"),
    "max_num_batched_tokens": flag("max_num_batched_tokens", int),
    "prefix_caching": flag("enable_prefix_caching", bool, negation="--no-enable-prefix-caching"),
    "kv_cache_dtype": flag("kv_cache_dtype"),
    "quantization": flag("quantization", str, "-q"),
    "dtype": flag("dtype"),
    "seed": flag("seed", int),
}
DEFAULTS: dict[str, Value] = {
    "tensor_parallel_size": 1,
    "max_num_seqs": AUTO,
    "gpu_memory_utilization": 0.9,
    "max_model_len": AUTO,
    "block_size": 16,
    "chunked_prefill": True,
    "max_num_batched_tokens": AUTO,
    "prefix_caching": True,
    "kv_cache_dtype": "auto",
    "quantization": None,
    "dtype": "auto",
    "seed": 0,
}
BOOL_FLAGS = frozenset(
    {"--enforce-eager", "--trust-remote-code", "--disable-log-requests", "--disable-log-stats"}
    | {"--enable-log-requests"}
)
# `vllm_config` text field in /server_info (dev mode) -> vLLM argument
CONFIG_FIELDS = {
    "tensor_parallel_size": "tensor_parallel_size",
    "max_seq_len": "max_model_len",
    "dtype": "dtype",
    "enable_prefix_caching": "enable_prefix_caching",
    "enable_chunked_prefill": "enable_chunked_prefill",
    "kv_cache_dtype": "kv_cache_dtype",
    "quantization": "quantization",
    "seed": "seed",
}
# what align says when one of these is translated to another engine's flag
PARAM_NOTES = {
    "gpu_memory_utilization": "vLLM's --gpu-memory-utilization bounds the whole instance (weights, "
    "activations, KV cache) as a fraction of total GPU memory",
    "block_size": "vLLM's --block-size is its KV block (default 16)",
    "max_num_batched_tokens": "vLLM's --max-num-batched-tokens is a per-step budget for prefill + decode",
    "prefix_caching": "vLLM's automatic prefix caching shares hashed blocks (on by default)",
}
METRICS = {
    "running": gauge("vllm:num_requests_running", "requests"),
    "waiting": gauge("vllm:num_requests_waiting", "requests"),
    "kv_usage": gauge("vllm:kv_cache_usage_perc", "ratio"),
    "preemptions": counter(
        "vllm:num_preemptions_total",
        "requests",
        help="Requests evicted for lack of KV blocks (recomputed later).",
    ),
    "prompt_tokens": counter("vllm:prompt_tokens_total", "tokens"),
    "generation_tokens": counter("vllm:generation_tokens_total", "tokens"),
    "ttft": histogram("vllm:time_to_first_token_seconds"),
    "itl": histogram("vllm:inter_token_latency_seconds"),
    "tpot": histogram("vllm:request_time_per_output_token_seconds"),
    "e2e": histogram("vllm:e2e_request_latency_seconds"),
    "queue_time": histogram("vllm:request_queue_time_seconds", help="Waiting before the first schedule."),
    "prefix_cache_hits": counter("vllm:prefix_cache_hits_total", "tokens"),
    "prefix_cache_queries": counter("vllm:prefix_cache_queries_total", "tokens"),
    "cached_tokens": counter("vllm:prompt_tokens_cached_total", "tokens"),
    "finished": counter(
        "vllm:request_success_total", "requests", "Finished requests by reason", split_by="finished_reason"
    ),
    "prefill_time": histogram("vllm:request_prefill_time_seconds", title="Prefill time"),
    "cache_config": info("vllm:cache_config_info", "Cache config (vllm:cache_config_info)"),
}

SPEC = EngineSpec(
    display_name="vLLM",
    name="vllm",
    package="vllm",
    default_port=8000,
    launch_prefixes=(("vllm", "serve"),),
    launch_modules=(
        "vllm.entrypoints.openai.api_server",
        "vllm.entrypoints.api_server",
        "vllm.entrypoints.cli.main serve",
    ),
    launcher=("vllm", "serve"),
    counterpart="sglang",
    child_titles=("VLLM::EngineCore", "VLLM::Worker"),
    env_prefixes=("VLLM_",),
    flags=FLAGS,
    param_notes=PARAM_NOTES,
    defaults=DEFAULTS,
    gpu_defaults={"max_num_seqs": GpuDefault(1024, 256), "max_num_batched_tokens": GpuDefault(8192, 2048)},
    bool_flags=BOOL_FLAGS,
    model_flags=("served_model_name", "model"),
    model_config={"dtype": ("torch_dtype", "dtype"), "max_model_len": ("max_position_embeddings",)},
    markers=(
        Marker("/version", "version"),
        Marker("/v1/models", "data.0.owned_by", "vllm"),
        Marker("/server_info", "vllm_config"),
    ),
    metadata_paths=("/version", "/v1/models", "/server_info"),
    server_info=ServerInfo(
        paths=("/server_info",),
        nested="server_args",
        config_string="vllm_config",
        config_fields=CONFIG_FIELDS,
    ),
    version_path="/version",
    # what the engine decided, on every vLLM (dev mode or not); "auto" values are skipped by resolve()
    info_metric=InfoMetric(
        METRICS["cache_config"].name,
        {
            "block_size": "block_size",
            "gpu_memory_utilization": "gpu_memory_utilization",
            "enable_prefix_caching": "enable_prefix_caching",
            "cache_dtype": "kv_cache_dtype",
        },
    ),
    flush_path="/reset_prefix_cache",
    answer_ids_field="return_token_ids",  # streamed as each chunk's `token_ids` (sessions use them)
    flush_needs="VLLM_SERVER_DEV_MODE=1",
    metrics=METRICS,
    startup_timeout_s=600.0,  # model load + torch.compile + CUDA graph capture take minutes
    cache_counters=("prefix_cache_hits", "prefix_cache_queries"),
)
