"""Target adapters and the registry that maps `--target` names to them.

Every engine in `infergauge.engines.ENGINES` that is not a simulator is a preset of its own (its
default port, metadata endpoints and flush come from its spec), so registering an engine makes
`--target NAME` work with no other edit; `openai` (any server at `--base-url`) and `sim` (the
embedded simulated engine) are the two targets that are not engines.
"""

from __future__ import annotations

from infergauge import engines
from infergauge.engines.base import EngineSpec
from loadgen.records import EngineMetadata
from loadgen.targets.base import FlushResult, Target
from loadgen.targets.openai import OpenAITarget
from loadgen.targets.preset import EnginePreset, default_url
from loadgen.targets.sim import DEFAULT_PERSONALITY, SimTarget

OTHER_TARGETS: dict[str, type[Target]] = {"openai": OpenAITarget, "sim": SimTarget}


_PRESETS: dict[str, tuple[EngineSpec, type[Target]]] = {}  # name -> (the spec it was made from, class)


def preset_class(spec: EngineSpec) -> type[Target]:
    """The target preset of a registered engine: its spec's port, metadata, flush and hint (one class
    per spec object, made on first use)."""
    made = _PRESETS.get(spec.name)
    if made is not None and made[0] is spec:
        return made[1]
    attrs = {
        "__doc__": f"{spec.title} on its default port: metadata and flush from its engine spec.",
        "name": spec.name,
        "engine": spec.name,
        "default_base_url": default_url(spec.name),
        "supports_ignore_eos": spec.ignore_eos,
        "hint": f"is {spec.title} running? try --target sim",
    }
    cls: type[Target] = type(f"{spec.name.capitalize()}Target", (EnginePreset,), attrs)
    _PRESETS[spec.name] = (spec, cls)
    return cls


def targets() -> dict[str, type[Target]]:
    """Every `--target` name -> its class, read from the engine registry now (registry order)."""
    presets = {name: preset_class(spec) for name, spec in engines.ENGINES.items() if not spec.plays}
    return {**presets, **OTHER_TARGETS}


def target_names() -> tuple[str, ...]:
    """The valid `--target` names, registry order, then openai and sim."""
    return tuple(targets())


def preset_for(engine: str, argv: tuple[str, ...] = ()) -> str | None:
    """The target preset that talks to a launched `engine` (the simulated one: its personality's)."""
    if engine == SimTarget.engine:
        given = argv[argv.index("--personality") + 1] if "--personality" in argv[:-1] else None
        return given or DEFAULT_PERSONALITY
    return next((name for name, cls in targets().items() if cls.engine == engine and name != "sim"), None)


def get_target(name: str) -> Target:
    """An instance of the named target; unknown names list the valid ones."""
    known = targets()
    if name not in known:
        raise ValueError(f"unknown target {name!r}; choose from {', '.join(known)}")
    return known[name]()


__all__ = [
    "EngineMetadata",
    "FlushResult",
    "Target",
    "get_target",
    "preset_class",
    "preset_for",
    "target_names",
    "targets",
]
