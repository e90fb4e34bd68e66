"""Read YAML keeping each value's line, so plan errors can name the line they come from."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml


@dataclass
class PlanError(Exception):
    """One or more problems in a plan file, each `FILE:LINE: message`."""

    problems: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return "\n".join(self.problems)


@dataclass(frozen=True)
class Node:
    """A YAML value with its 1-based line; mappings and sequences hold Nodes."""

    value: Any
    line: int

    def plain(self) -> Any:
        """The value with every nested Node unwrapped."""
        if isinstance(self.value, dict):
            return {k: v.plain() for k, v in self.value.items()}
        if isinstance(self.value, list):
            return [v.plain() for v in self.value]
        return self.value


def _convert(node: yaml.Node, loader: yaml.SafeLoader) -> Node:
    line = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        out: dict[str, Node] = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            out[str(key)] = _convert(value_node, loader)
        return Node(out, line)
    if isinstance(node, yaml.SequenceNode):
        return Node([_convert(item, loader) for item in node.value], line)
    return Node(loader.construct_object(node, deep=True), line)


def parse_yaml(text: str, source: str) -> Node:
    """Parse one YAML document into Nodes; a syntax error becomes a PlanError with its line."""
    loader = yaml.SafeLoader(text)
    try:
        root = loader.get_single_node()
        if root is None:
            raise PlanError([f"{source}:1: the plan is empty"])
        return _convert(root, loader)
    except yaml.MarkedYAMLError as exc:
        line = exc.problem_mark.line + 1 if exc.problem_mark else 1
        raise PlanError([f"{source}:{line}: invalid YAML: {exc.problem}"]) from None
    finally:
        loader.dispose()
