"""Walks plan nodes, collecting every problem as `FILE:LINE: message`."""

from __future__ import annotations

from typing import Any

from loadgen.config import ConfigError, normalise_keys
from loadgen.experiments.plantypes import RUNNER_FIELDS
from loadgen.experiments.yamlnodes import Node


class Checker:
    """Collects problems while walking the plan's nodes."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.problems: list[str] = []

    def bad(self, node: Node, message: str) -> None:
        self.problems.append(f"{self.source}:{node.line}: {message}")

    def mapping(
        self, node: Node, where: str, allowed: tuple[str, ...], required: tuple[str, ...] = ()
    ) -> dict[str, Node]:
        if not isinstance(node.value, dict):
            self.bad(node, f"{where} must be a mapping")
            return {}
        for key, value in node.value.items():
            if key not in allowed:
                self.bad(value, f"unknown key {key!r} in {where}; valid keys: {', '.join(allowed)}")
        for key in required:
            if key not in node.value:
                self.bad(node, f"{where} needs {key!r}")
        return {k: v for k, v in node.value.items() if k in allowed}

    def text(self, node: Node | None, where: str, default: str = "") -> str:
        if node is None:
            return default
        if not isinstance(node.value, str) or not node.value:
            self.bad(node, f"{where} must be a non-empty string, got {node.value!r}")
            return default
        return node.value

    def choice(self, node: Node | None, where: str, choices: tuple[str, ...], default: str) -> str:
        value = self.text(node, where, default)
        if node is not None and value not in choices:
            self.bad(node, f"invalid {where} {value!r}; choose from {', '.join(choices)}")
        return value

    def number(self, node: Node | None, where: str, default: float, *, integer: bool = False) -> float:
        if node is None:
            return default
        value = node.value
        ok_type = isinstance(value, int) if integer else isinstance(value, int | float)
        if isinstance(value, bool) or not ok_type or value <= 0:
            kind = "a positive integer" if integer else "a positive number"
            self.bad(node, f"{where} must be {kind}, got {value!r}")
            return default
        return float(value)

    def flag(self, node: Node | None, where: str, default: bool) -> bool:
        if node is None:
            return default
        if not isinstance(node.value, bool):
            self.bad(node, f"{where} must be true or false, got {node.value!r}")
            return default
        return bool(node.value)

    def names(self, node: Node | None, where: str, choices: list[str], default: list[str]) -> tuple[str, ...]:
        if node is None:
            return tuple(default)
        if not isinstance(node.value, list) or not node.value:
            self.bad(node, f"{where} must be a non-empty list")
            return ()
        out = []
        for item in node.value:
            if item.value not in choices:
                self.bad(item, f"unknown {where[:-1]} {item.value!r}; choose from {', '.join(choices)}")
            else:
                out.append(str(item.value))
        return tuple(out)

    def settings(self, node: Node | None, where: str) -> dict[str, Any]:
        if node is None:
            return {}
        out: dict[str, Any] = {}
        keys = tuple(node.value) if isinstance(node.value, dict) else ()
        for key, value in self.mapping(node, where, keys).items():
            if key.replace("-", "_") in RUNNER_FIELDS:
                self.bad(value, f"{where} may not set {key!r}: the experiment runner sets it per run")
                continue
            try:
                out.update(normalise_keys({key: value.plain()}, where))
            except ConfigError as exc:
                self.bad(value, str(exc))
        return out
