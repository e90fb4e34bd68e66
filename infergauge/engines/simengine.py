"""The simulated engine (`python -m simengine`, `loadgen sim`) as data.

It accepts vLLM's and SGLang's spellings of every neutral flag (vLLM's canonical); over HTTP it
answers like the personality it plays, so its metadata is recognised as that engine's.
"""

from __future__ import annotations

from infergauge.engines import sglang, vllm
from infergauge.engines.base import EngineSpec, Flag, Switch


def _sglang_spellings(key: str) -> tuple[str, ...]:
    other = sglang.FLAGS.get(key)
    return () if other is None or other.inverted else other.spellings


FLAGS = {
    key: Flag(
        f.dest,
        f.spellings + _sglang_spellings(key),
        f.kind,
        f.negation,
    )
    for key, f in vllm.FLAGS.items()
}

SPEC = EngineSpec(
    name="simengine",
    package="infergauge",
    default_port=8000,
    launch_prefixes=(("loadgen", "sim"),),
    launch_modules=("simengine",),
    counterpart="sglang",
    plays=("vllm", "sglang", "llamacpp"),
    env_prefixes=("SIMENGINE_",),
    flags=FLAGS,
    switches={"prefix_caching": Switch("disable_radix_cache", True)},
    defaults=dict(vllm.DEFAULTS),
    bool_flags=vllm.BOOL_FLAGS | sglang.BOOL_FLAGS,
    model_flags=("served_model_name", "model", "model_path"),
    startup_timeout_s=30.0,  # no model to load: seconds
)
