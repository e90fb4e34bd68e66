"""The engine registry: every engine infergauge knows, and how to tell which one is running.

    spec = get("vllm")                                   # an EngineSpec (ValueError lists valid names)
    spec, start = detect_cmdline(["vllm", "serve", "m"])  # from a launch line
    spec = detect_http({"/version": {...}, "/v1/models": {...}})  # from metadata bodies, by content

Adding an engine is one file with a `SPEC` plus one line here (or `register(spec)` at run time).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from infergauge.engines import llamacpp, sglang, simengine, vllm
from infergauge.engines.base import MISSING, EngineSpec, Marker, dig

ENGINES: dict[str, EngineSpec] = {
    spec.name: spec for spec in (vllm.SPEC, sglang.SPEC, llamacpp.SPEC, simengine.SPEC)
}


class UnknownEngine(ValueError):
    """An engine name outside the registry."""

    def __init__(self, name: str) -> None:
        super().__init__(f"unknown engine {name!r}; choose from {', '.join(ENGINES)}")


def get(name: str) -> EngineSpec:
    """The registered engine called `name`."""
    try:
        return ENGINES[name]
    except KeyError:
        raise UnknownEngine(name) from None


def register(spec: EngineSpec) -> EngineSpec:
    """Add (or replace) an engine in the registry; returns it."""
    ENGINES[spec.name] = spec
    return spec


def _module_match(argv: Sequence[str], at: int) -> tuple[EngineSpec | None, int]:
    candidates = [(spec, module.split()) for spec in ENGINES.values() for module in spec.launch_modules]
    for spec, parts in sorted(candidates, key=lambda c: -len(c[1])):
        if list(argv[at : at + len(parts)]) == parts:
            return spec, at + len(parts)
    return None, 0


def _prefix_match(argv: Sequence[str], at: int) -> tuple[EngineSpec | None, int]:
    base = argv[at].rsplit("/", 1)[-1]
    for spec in ENGINES.values():
        for prefix in spec.launch_prefixes:
            if base == prefix[0] and list(argv[at + 1 : at + len(prefix)]) == list(prefix[1:]):
                return spec, at + len(prefix)
    return None, 0


def detect_cmdline(argv: Sequence[str]) -> tuple[EngineSpec | None, int]:
    """Which engine a command line launches, and the index where its flags start ((None, 0) if none).

    Only the program and interpreter positions count, so `ruff check simengine` and
    `timeout 5 python -m simengine` (a wrapper; its child is the engine) are not engines.
    """
    interpreter = bool(argv) and argv[0].rsplit("/", 1)[-1].startswith("python")
    for i, token in enumerate(argv[:4]):
        if token == "-m" and interpreter:
            return _module_match(argv, i + 1)
        if (i == 0 or interpreter) and i <= 1:
            spec, start = _prefix_match(argv, i)
            if spec is not None:
                return spec, start
    return None, 0


def by_title(title: str) -> EngineSpec | None:
    """The engine whose child processes take this title (`VLLM::EngineCore`, `sglang::scheduler`)."""
    return next((spec for spec in ENGINES.values() if title.strip() in spec.child_titles), None)


def marker_found(marker: Marker, bodies: Mapping[str, Any]) -> bool:
    """True when the metadata bodies show this marker."""
    value = dig(bodies.get(marker.path), marker.field)
    return value is not MISSING and (marker.equals is None or value == marker.equals)


def detect_http(bodies: Mapping[str, Any]) -> EngineSpec | None:
    """The engine these metadata bodies ({path: parsed JSON}) come from: the one whose markers match
    most (by content: a vLLM in dev mode answers `/server_info` too), None when none matches."""
    scores = [(sum(marker_found(m, bodies) for m in spec.markers), spec) for spec in ENGINES.values()]
    best = max(scores, key=lambda pair: pair[0], default=(0, None))
    return best[1] if best[0] > 0 else None


def names_text(conjunction: str = "or") -> str:
    """The registered engines as people write them, for messages: "vLLM, SGLang, llama.cpp or the
    simulated engine" (registry order, simulators last)."""
    real = [spec.title for spec in ENGINES.values() if not spec.plays]
    real += ["the simulated engine"] if any(spec.plays for spec in ENGINES.values()) else []
    return f"{', '.join(real[:-1])} {conjunction} {real[-1]}" if len(real) > 1 else "".join(real)


def default_ports_text() -> str:
    """`vllm :8000, sglang :30000, ...` for every engine with a target preset."""
    return ", ".join(f"{spec.name} :{spec.default_port}" for spec in ENGINES.values() if not spec.plays)


def metadata_paths() -> tuple[str, ...]:
    """Every metadata endpoint any registered engine answers, registry order, each once."""
    return tuple(dict.fromkeys(path for spec in ENGINES.values() for path in spec.metadata_paths))


def info_metric_paths() -> tuple[str, ...]:
    """Where registered engines expose an info metric of decided values (`/metrics`), each once."""
    return tuple(dict.fromkeys(s.info_metric.path for s in ENGINES.values() if s.info_metric is not None))


def readiness_paths() -> tuple[str, ...]:
    """Every registered engine's readiness endpoint (`/health`), registry order, each once."""
    return tuple(dict.fromkeys(spec.readiness_path for spec in ENGINES.values()))


def readiness_timeout_s(path: str, floor: float) -> float:
    """The longest readiness timeout of the engines answering readiness at `path`, at least `floor`."""
    return max([floor, *(s.readiness_timeout_s for s in ENGINES.values() if s.readiness_path == path)])


def default_ports() -> dict[str, int]:
    """Engine name -> its default HTTP port."""
    return {spec.name: spec.default_port for spec in ENGINES.values()}


def env_prefixes() -> tuple[str, ...]:
    """Environment prefixes worth recording for any engine (CUDA/NCCL/HF/torch plus each engine's)."""
    common = ("CUDA_VISIBLE_DEVICES", "NCCL_", "HF_", "TORCH_", "PYTORCH_CUDA_ALLOC_CONF")
    return tuple(dict.fromkeys(common + tuple(p for s in ENGINES.values() for p in s.env_prefixes)))


__all__ = [
    "ENGINES",
    "EngineSpec",
    "UnknownEngine",
    "by_title",
    "default_ports",
    "detect_cmdline",
    "detect_http",
    "env_prefixes",
    "get",
    "info_metric_paths",
    "metadata_paths",
    "readiness_paths",
    "readiness_timeout_s",
    "register",
]
