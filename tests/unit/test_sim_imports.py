"""The simulated engine imports without a circle: app -> openai_api -> personalities -> state."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO_ROOT

PACKAGE = REPO_ROOT / "simengine"


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO_ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, known: set[str]) -> set[str]:
    """Every simengine module `path` imports anywhere in the file (function-local imports included)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        found.update(name for name in names if name in known)
    return found


def _import_graph() -> dict[str, set[str]]:
    files = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    known = set(files)
    return {name: _imports(path, known) - {name} for name, path in files.items()}


def _find_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import circle as a path of module names, or [] (depth-first search with colours)."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return []

    for start in sorted(graph):
        if start not in state and (cycle := visit(start)):
            return cycle
    return []


def test_cycle_finder_sees_a_circle() -> None:
    assert _find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _find_cycle({"a": {"b"}, "b": set()}) == []


def test_simengine_has_no_import_circle() -> None:
    graph = _import_graph()
    assert "simengine.config" in graph["simengine.app"]  # the graph is really read
    assert _find_cycle(graph) == []


def test_shared_state_imports_no_handler_module() -> None:
    assert _import_graph()["simengine.state"].isdisjoint(
        {"simengine.app", "simengine.openai_api", "simengine.personalities"}
    )
