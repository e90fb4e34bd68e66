"""Model facts from the model directory's config.json (architecture, dtype, quantization, revision)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

_SNAPSHOT = re.compile(r"models--(?P<org>[^/]+?)--(?P<name>[^/]+)/snapshots/(?P<rev>[0-9a-f]{7,64})")
KEYS = (
    "model_type",
    "architectures",
    "torch_dtype",
    "dtype",
    "max_position_embeddings",
    "num_hidden_layers",
    "hidden_size",
    "num_attention_heads",
    "num_key_value_heads",
    "vocab_size",
)


def hf_cache_dirs(env: dict[str, str]) -> list[Path]:
    """Hugging Face hub caches to look in, from the engine's env first (HF_HUB_CACHE, HF_HOME)."""
    dirs = []
    for source in (env, os.environ):
        if source.get("HF_HUB_CACHE"):
            dirs.append(Path(source["HF_HUB_CACHE"]))
        if source.get("HF_HOME"):
            dirs.append(Path(source["HF_HOME"]) / "hub")
    dirs.append(Path.home() / ".cache" / "huggingface" / "hub")
    return dirs


def resolve_model_dir(model: str, env: dict[str, str] | None = None) -> Path | None:
    """A local directory for `model`: the path itself, or the HF cache snapshot of a repo id."""
    path = Path(model)
    if path.is_dir():
        return path
    if "/" not in model or model.startswith("/"):
        return None
    org, name = model.split("/", 1)
    for cache in hf_cache_dirs(env or {}):
        repo = cache / f"models--{org}--{name}"
        ref = repo / "refs" / "main"
        if ref.is_file():
            snapshot = repo / "snapshots" / ref.read_text().strip()
            if snapshot.is_dir():
                return snapshot
    return None


def read_model_config(model: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Selected config.json facts, `quantization` from quantization_config, `revision` from the cache path."""
    facts: dict[str, Any] = {"source": model}
    directory = resolve_model_dir(model, env)
    if directory is None:
        return facts
    match = _SNAPSHOT.search(str(directory.resolve()))
    if match:
        facts["hf_repo"] = f"{match['org']}/{match['name']}"
        facts["revision"] = match["rev"]
    try:
        config = json.loads((directory / "config.json").read_text())
    except (OSError, ValueError):
        return facts
    facts.update({key: config[key] for key in KEYS if key in config})
    quant = config.get("quantization_config")
    if isinstance(quant, dict):
        facts["quantization"] = {
            k: quant[k] for k in ("quant_method", "bits", "group_size", "fmt") if k in quant
        }
    facts["weight_format"] = (
        "safetensors"
        if any(directory.glob("*.safetensors"))
        else ("pytorch" if any(directory.glob("*.bin")) else "unknown")
    )
    return facts
