"""Flatten nested manifest dicts into dotted keys, so two manifests can be compared key by key."""

from __future__ import annotations

from typing import Any


def parse_flag_list(argv: list[Any]) -> dict[str, Any]:
    """`["--max-num-seqs", "8", "--enable-x"]` -> `{"max_num_seqs": "8", "enable_x": True}`."""
    out: dict[str, Any] = {}
    items = [str(a) for a in argv]
    i = 0
    while i < len(items):
        item = items[i]
        if not item.startswith("--"):
            i += 1
            continue
        name, eq, value = item[2:].partition("=")
        key = name.replace("-", "_")
        if eq:
            out[key] = value
        elif i + 1 < len(items) and not items[i + 1].startswith("--"):
            out[key] = items[i + 1]
            i += 1
        else:
            out[key] = True
        i += 1
    return out


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """Nested dicts/lists -> {"a.b.0.c": leaf}; flag lists under `sim_args` become dicts."""
    if prefix.endswith("sim_args") and isinstance(value, list):
        value = parse_flag_list(value)
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return out or {prefix: {}}
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        out = {}
        for index, item in enumerate(value):
            # exporter checks are keyed by their id, so the same check lines up in both manifests
            name = item["id"] if isinstance(item.get("id"), str) else str(index)
            out.update(flatten({k: v for k, v in item.items() if k != "id"}, f"{prefix}.{name}"))
        return out
    return {prefix: value}
