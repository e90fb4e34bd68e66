"""SGLang (0.5.x `ServerArgs`) as data: flags and defaults, processes, endpoints, metric names.

SGLang has no on/off switch for chunked prefill (`--chunked-prefill-size -1` turns it off) and
spells prefix caching inverted (`--disable-radix-cache`): both are data here (`Switch`, `inverted`).
Metric names are the ones in the golden capture (tests/fixtures/golden/sglang-0.5.14/metrics_*.txt).
"""

from __future__ import annotations

from infergauge.engines.base import AUTO, EngineSpec, Marker, ServerInfo, Switch, Value, flag
from infergauge.engines.metrics import counter, gauge, histogram
from infergauge.engines.vllm import DEFAULTS as VLLM_DEFAULTS

FLAGS = {
    "tensor_parallel_size": flag("tp_size", int, "--tensor-parallel-size", "--tp"),
    "max_num_seqs": flag("max_running_requests", int),
    "gpu_memory_utilization": flag("mem_fraction_static", float),
    "max_model_len": flag("context_length", int),
    "block_size": flag("page_size", int),
    # the prefill chunk is the closest match of vLLM's per-step budget; -1 = no chunking
    "max_num_batched_tokens": flag("chunked_prefill_size", int, off=-1),
    "prefix_caching": flag("disable_radix_cache", bool, inverted=True),
    "kv_cache_dtype": flag("kv_cache_dtype"),
    "quantization": flag("quantization"),
    "dtype": flag("dtype"),
    "seed": flag("random_seed", int),
}
# SGLang differs from vLLM's defaults only here
DEFAULTS: dict[str, Value] = {**VLLM_DEFAULTS, "gpu_memory_utilization": AUTO, "block_size": 1, "seed": AUTO}
BOOL_FLAGS = frozenset(
    {"--trust-remote-code", "--enable-metrics", "--disable-cuda-graph", "--enable-mixed-chunk"}
    | {"--disable-overlap-schedule", "--enable-torch-compile", "--enable-dp-attention"}
    | {"--skip-server-warmup", "--disable-radix-cache"}
)
# what align says when one of these is translated to another engine's flag
PARAM_NOTES = {
    "gpu_memory_utilization": "SGLang's --mem-fraction-static covers only the static pool (weights + KV "
    "cache), so the same value gives a different KV capacity",
    "block_size": "SGLang's --page-size (default 1) sets the same granularity but trades fragmentation "
    "differently",
    "max_num_batched_tokens": "SGLang's --chunked-prefill-size only caps the prefill chunk",
    "chunked_prefill": "SGLang has no on/off switch for chunked prefill: on is its default, off is "
    "--chunked-prefill-size -1",
    "prefix_caching": "SGLang's RadixAttention shares prefixes in a radix tree (on by default)",
    "seed": "SGLang's --random-seed is random per launch unless set",
}
METRICS = {
    "running": gauge("sglang:num_running_reqs", "requests"),
    "waiting": gauge("sglang:num_queue_reqs", "requests", "Queued requests"),
    "kv_usage": gauge("sglang:token_usage", "ratio", "KV-cache (token pool) usage"),
    "preemptions": gauge(
        "sglang:num_retracted_reqs",
        "requests",
        "Retracted requests",
        "Requests retracted for lack of KV space (SGLang's preemption).",
    ),
    "prompt_tokens": counter("sglang:prompt_tokens_total", "tokens"),
    "generation_tokens": counter("sglang:generation_tokens_total", "tokens"),
    "ttft": histogram("sglang:time_to_first_token_seconds"),
    "itl": histogram("sglang:inter_token_latency_seconds"),
    "e2e": histogram("sglang:e2e_request_latency_seconds"),
    "queue_time": histogram("sglang:queue_time_seconds"),
    "cached_tokens": counter("sglang:cached_tokens_total", "tokens"),
    "cache_hit_rate": gauge("sglang:cache_hit_rate", "ratio", "Prefix (radix) cache hit rate"),
    "kv_used_tokens": gauge("sglang:kv_used_tokens", "tokens", "KV tokens used"),
    "kv_capacity_tokens": gauge("sglang:max_total_num_tokens", "tokens", "KV token capacity"),
    "requests": counter("sglang:num_requests_total", "requests", "Requests"),
    "aborted": counter("sglang:num_aborted_requests_total", "requests", "Aborted requests"),
    "gen_throughput": gauge("sglang:gen_throughput", "tokens/s", "Generation throughput (its gauge)"),
}

SPEC = EngineSpec(
    display_name="SGLang",
    name="sglang",
    package="sglang",
    default_port=30000,
    launch_prefixes=(("sglang", "serve"),),
    launch_modules=("sglang.launch_server",),
    launcher=("python", "-m", "sglang.launch_server"),
    model_flag="--model-path",
    counterpart="vllm",
    child_titles=("sglang::scheduler", "sglang::detokenizer", "sglang::data_parallel_controller"),
    env_prefixes=("SGLANG_",),
    flags=FLAGS,
    param_notes=PARAM_NOTES,
    switches={"chunked_prefill": Switch("chunked_prefill_size", -1)},
    defaults=DEFAULTS,
    bool_flags=BOOL_FLAGS,
    model_flags=("served_model_name", "model_path", "model"),
    model_config={"dtype": ("torch_dtype", "dtype"), "max_model_len": ("max_position_embeddings",)},
    markers=(
        Marker("/get_server_info", "tp_size"),
        Marker("/get_server_info", "max_running_requests"),
        Marker("/server_info", "tp_size"),
        Marker("/server_info", "max_running_requests"),
        Marker("/v1/models", "data.0.owned_by", "sglang"),
    ),
    metadata_paths=("/get_server_info", "/server_info", "/get_model_info", "/model_info", "/v1/models"),
    model_info_paths=("/get_model_info", "/model_info"),
    server_info=ServerInfo(
        paths=("/get_server_info", "/server_info"),
        version_key="version",
        # `max_running_requests: null` = SGLang sized it from the KV pool; what it chose (per DP rank)
        effective={"max_running_requests": "internal_states.0.effective_max_running_requests_per_dp"},
    ),
    # /health runs a one-token generation and checks for it once a second (http_server.py)
    readiness_timeout_s=5.0,
    flush_path="/flush_cache",
    metrics=METRICS,
    startup_timeout_s=900.0,  # 105 s cold start on a 32 M-parameter model; real models take minutes
    # every prompt token is looked up in the radix cache: the hit share is cached / prompt tokens
    cache_counters=("cached_tokens", "prompt_tokens"),
)
