"""Target adapters, one per engine, and the registry that maps `--target` names to them."""

from __future__ import annotations

from loadgen.targets.base import EngineMetadata, FlushResult, Target
from loadgen.targets.openai import OpenAITarget
from loadgen.targets.sglang import SGLangTarget
from loadgen.targets.sim import DEFAULT_PERSONALITY, SimTarget
from loadgen.targets.vllm import VLLMTarget

TARGETS: dict[str, type[Target]] = {
    "vllm": VLLMTarget,
    "sglang": SGLangTarget,
    "openai": OpenAITarget,
    "sim": SimTarget,
}


def preset_for(engine: str, argv: tuple[str, ...] = ()) -> str | None:
    """The target preset that talks to a launched `engine` (the simulated one: its personality's)."""
    if engine == SimTarget.engine:
        given = argv[argv.index("--personality") + 1] if "--personality" in argv[:-1] else None
        return given or DEFAULT_PERSONALITY
    return next((name for name, cls in TARGETS.items() if cls.engine == engine and name != "sim"), None)


def get_target(name: str) -> Target:
    """An instance of the named target; unknown names list the valid ones."""
    try:
        return TARGETS[name]()
    except KeyError:
        raise ValueError(f"unknown target {name!r}; choose from {', '.join(TARGETS)}") from None


__all__ = ["TARGETS", "EngineMetadata", "FlushResult", "Target", "get_target", "preset_for"]
