"""SGLang on its default port: metadata and flush from its engine spec (infergauge/engines/sglang.py)."""

from __future__ import annotations

from loadgen.targets.preset import EnginePreset, default_url


class SGLangTarget(EnginePreset):
    """SGLang's server (`/get_server_info`, `/get_model_info`, `POST /flush_cache`)."""

    name = "sglang"
    engine = "sglang"
    default_base_url = default_url("sglang")
    supports_ignore_eos = True
    hint = "is SGLang running? try --target sim"
