"""llama.cpp's `llama-server` as data: flags and defaults, process, endpoints, metric names.

Read from llama.cpp's source (`common/arg.cpp`, `common/common.h`, `tools/server/server.cpp`,
`server-context.cpp`, `server-task.cpp`; the tree vendored in llama-cpp-python 0.3.36) and checked
against the real server's answers in tests/fixtures/golden/llamacpp/. Facts that shape what a run
can know:
- Its launch flags are not served over HTTP; `/props` states what it decided: `total_slots` (the
  `--parallel` slots, 4 when `-np` is left at its default -1 = auto) and the per-slot context
  (`default_generation_settings.n_ctx`); `build_info` (`b<build>-<commit>`) is its version.
- `--ctx-size` is the whole KV context shared by the slots (each slot gets ctx / parallel unless
  `--kv-unified`), not a per-request limit like vLLM's `--max-model-len`: it is recorded as a launch
  flag and never translated to `max_model_len`.
- `/metrics` is served only with `--metrics`, and has no latency histograms: counters and gauges
  under `llamacpp:` names. `prompt_tokens_total` counts the prompt tokens it processed, excluding
  the ones reused from its prompt cache (`prompt_tokens_cached_total`).
- There is no endpoint that empties the whole prompt cache (only `POST /slots/<id>?action=erase`,
  one slot at a time, and `--slot-save-path` for saving), so a cold-cache run means a restart.
"""

from __future__ import annotations

from infergauge.engines.base import AUTO, EngineSpec, Marker, ServerInfo, Value, flag
from infergauge.engines.metrics import counter, gauge

FLAGS = {
    # slots = requests decoded together; -1 (its default) = auto, which the server makes 4
    "max_num_seqs": flag("parallel", int, "-np"),
    "max_num_batched_tokens": flag("batch_size", int, "-b"),
    "prefix_caching": flag("cache_prompt", bool, negation="--no-cache-prompt"),
    "kv_cache_dtype": flag("cache_type_k", str, "-ctk"),
    "seed": flag("seed", int, "-s"),
}
DEFAULTS: dict[str, Value] = {
    "max_num_seqs": AUTO,
    "max_num_batched_tokens": 2048,
    "prefix_caching": True,
    "kv_cache_dtype": "f16",
    "seed": AUTO,  # -1: a random seed each start
}
BOOL_FLAGS = frozenset(
    {"--metrics", "--props", "--slots", "--no-slots", "--jinja", "--no-jinja", "--cont-batching", "-cb"}
    | {"--no-cont-batching", "-nocb", "--kv-unified", "-kvu", "--no-kv-unified", "-no-kvu", "--swa-full"}
    | {"--no-mmap", "--mlock", "--verbose", "-v", "--no-warmup", "--cache-prompt", "--no-cache-prompt"}
    | {"--no-webui", "--embedding", "--embeddings", "--reranking", "--context-shift"}
)
METRICS = {
    "running": gauge("llamacpp:requests_processing", "requests"),
    "waiting": gauge("llamacpp:requests_deferred", "requests", "Deferred requests"),
    # prompt tokens it computed: the ones reused from its prompt cache are counted apart
    "prompt_tokens": counter("llamacpp:prompt_tokens_total", "tokens", "Prompt tokens computed"),
    "generation_tokens": counter("llamacpp:tokens_predicted_total", "tokens"),
    "cached_tokens": counter("llamacpp:prompt_tokens_cached_total", "tokens"),
    "prompt_seconds": counter("llamacpp:prompt_seconds_total", "seconds", "Prompt processing time"),
    "generation_seconds": counter("llamacpp:tokens_predicted_seconds_total", "seconds", "Generation time"),
    "decode_calls": counter("llamacpp:n_decode_total", "", "llama_decode() calls"),
    "busy_slots_per_decode": gauge("llamacpp:n_busy_slots_per_decode", "", "Busy slots per decode"),
    "prompt_throughput": gauge("llamacpp:prompt_tokens_seconds", "tokens/s", "Prompt throughput (gauge)"),
    "gen_throughput": gauge("llamacpp:predicted_tokens_seconds", "tokens/s", "Generation throughput (gauge)"),
}

SPEC = EngineSpec(
    display_name="llama.cpp",
    name="llamacpp",
    package="llama.cpp",
    default_port=8080,
    launch_prefixes=(("llama-server",),),
    launcher=("llama-server",),
    model_flag="--model",
    env_prefixes=("LLAMA_ARG_",),
    flags=FLAGS,
    defaults=DEFAULTS,
    bool_flags=BOOL_FLAGS,
    model_flags=("alias", "a", "model", "m"),  # -a / -m: short spellings the parser keeps as dests
    markers=(Marker("/props", "build_info"), Marker("/v1/models", "data.0.owned_by", "llamacpp")),
    metadata_paths=("/props", "/v1/models"),
    server_info=ServerInfo(
        paths=("/props",),
        version_key="build_info",
        effective={"parallel": "total_slots"},
    ),
    # 503 {"error": {"message": "Loading model", ...}} until the model is loaded
    readiness_timeout_s=1.0,
    startup_timeout_s=300.0,
    metrics=METRICS,
    model_label=None,  # its metrics carry no labels at all
)
