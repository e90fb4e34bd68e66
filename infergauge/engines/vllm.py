"""vLLM (0.26, V1 engine) as data: flags and defaults, processes, endpoints, metric names.

Defaults follow `EngineArgs` (OpenAI API server context): `max_num_seqs` / `max_num_batched_tokens`
are 1024 / 8192 on GPUs with >= 70 GiB that are not A100s, else 256 / 2048 (`get_batch_defaults`).
Metric names are the ones in the golden capture (tests/fixtures/golden/vllm-0.26.0/metrics_*.txt).
"""

from __future__ import annotations

from infergauge.engines.base import AUTO, EngineSpec, GpuDefault, InfoMetric, Marker, ServerInfo, Value, flag

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
METRICS = {
    "running": "vllm:num_requests_running",
    "waiting": "vllm:num_requests_waiting",
    "kv_usage": "vllm:kv_cache_usage_perc",
    "preemptions": "vllm:num_preemptions_total",
    "prompt_tokens": "vllm:prompt_tokens_total",
    "generation_tokens": "vllm:generation_tokens_total",
    "ttft": "vllm:time_to_first_token_seconds",
    "itl": "vllm:inter_token_latency_seconds",
    "tpot": "vllm:request_time_per_output_token_seconds",
    "e2e": "vllm:e2e_request_latency_seconds",
    "queue_time": "vllm:request_queue_time_seconds",
    "prefix_cache_hits": "vllm:prefix_cache_hits_total",
    "prefix_cache_queries": "vllm:prefix_cache_queries_total",
    "cached_tokens": "vllm:prompt_tokens_cached_total",
    "finished": "vllm:request_success_total",
    "prefill_time": "vllm:request_prefill_time_seconds",
    "cache_config": "vllm:cache_config_info",
}

SPEC = EngineSpec(
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
        METRICS["cache_config"],
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
