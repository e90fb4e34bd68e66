"""The layering the design promises, held by an `ast` walk over every import (top level and inside
functions) and every string constant of the shipped code.

- loadgen's layers import only their own layer or lower ones:
  base (records, stats, config, provenance, workload) < transport < targets < results + store < run < scale
  < analysis < experiments < baseline < report < cli; nothing outside loadgen/cli imports the CLI;
- records, stats and analysis import no transport and no aiohttp (`import loadgen.stats` works
  without aiohttp installed);
- the exporter imports nothing of loadgen; the simulated engine nothing of loadgen or the exporter;
- infergauge/ (what every binary shares) imports only the standard library;
- the engine names "vllm" / "sglang" (and their metric prefixes) appear as strings only in the
  engine files, the simulated engine's personalities, the target presets and the dashboard
  generator's engine module: everything else asks the engine registry.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("loadgen", "exporter", "simengine", "infergauge", "grafana", "bench")

# loadgen's layers, lowest first; a module may import its own layer or a lower one
LAYERS: tuple[tuple[str, ...], ...] = (
    ("", "records", "stats", "config", "provenance", "workload", "prefix_cache"),
    ("transport",),
    ("targets",),
    ("results", "store"),
    ("run",),
    ("scale",),
    ("analysis",),
    ("experiments",),
    ("baseline",),
    ("report",),
    ("cli",),
)
RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names}
ENGINE_STRING_HOMES = (
    "infergauge/engines/",
    "simengine/personalities/",
    "loadgen/targets/",
    "grafana/dashgen/engines.py",
)
ENGINE_NAMES = ("vllm", "sglang")


def source_files() -> Iterator[Path]:
    for package in PACKAGES:
        yield from sorted((REPO / package).rglob("*.py"))


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> Iterator[tuple[int, str]]:
    """(line, absolute module) of every import in the file, relative ones resolved."""
    package = module_name(path).rsplit(".", 1)[0] if path.name != "__init__.py" else module_name(path)
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                yield node.lineno, f"{base}.{node.module}" if node.module else base
            elif node.module:
                yield node.lineno, node.module


def loadgen_layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def where(path: Path, line: int) -> str:
    return f"{path.relative_to(REPO)}:{line}"


def test_loadgen_layers_import_only_downwards() -> None:
    unknown = sorted(
        {loadgen_layer(module_name(p)) for p in (REPO / "loadgen").rglob("*.py")} - set(RANK),
    )
    assert unknown == [], f"loadgen modules outside every layer: {unknown}"
    upward = []
    for path in (REPO / "loadgen").rglob("*.py"):
        own = RANK[loadgen_layer(module_name(path))]
        for line, module in imports(path):
            if module.split(".")[0] == "loadgen" and RANK.get(loadgen_layer(module), 0) > own:
                upward.append(f"{where(path, line)} imports {module}")
    assert upward == []


def test_nothing_outside_the_cli_imports_it() -> None:
    found = [
        f"{where(path, line)} imports {module}"
        for path in source_files()
        if not module_name(path).startswith("loadgen.cli")
        for line, module in imports(path)
        if module.startswith("loadgen.cli")
    ]
    assert found == []


@pytest.mark.parametrize("part", ["loadgen/records.py", "loadgen/stats.py", "loadgen/analysis"])
def test_records_stats_and_analysis_import_no_transport(part: str) -> None:
    root = REPO / part
    paths = [root] if root.is_file() else sorted(root.rglob("*.py"))
    found = [
        f"{where(path, line)} imports {module}"
        for path in paths
        for line, module in imports(path)
        if module.startswith(("loadgen.transport", "aiohttp"))
    ]
    assert found == []


def test_stats_imports_without_aiohttp() -> None:
    code = "import sys; sys.modules['aiohttp'] = None; import loadgen.stats, loadgen.records"
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [("exporter", ("loadgen",)), ("simengine", ("loadgen", "exporter")), ("infergauge", ("loadgen",))],
)
def test_parts_stay_apart(package: str, forbidden: tuple[str, ...]) -> None:
    found = [
        f"{where(path, line)} imports {module}"
        for path in sorted((REPO / package).rglob("*.py"))
        for line, module in imports(path)
        if module.split(".")[0] in forbidden
    ]
    assert found == []


def test_infergauge_imports_only_the_standard_library() -> None:
    found = [
        f"{where(path, line)} imports {module}"
        for path in sorted((REPO / "infergauge").rglob("*.py"))
        for line, module in imports(path)
        if module.split(".")[0] not in sys.stdlib_module_names and module.split(".")[0] != "infergauge"
    ]
    assert found == []


def engine_strings(path: Path) -> Iterator[tuple[int, str]]:
    """String constants naming an engine (docstrings left out: prose may name them)."""
    tree = ast.parse(path.read_text(), str(path))
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            text = node.value
            if text in ENGINE_NAMES or text.startswith(tuple(f"{name}:" for name in ENGINE_NAMES)):
                yield node.lineno, text


def test_engine_names_live_in_the_engine_files() -> None:
    found = [
        f"{where(path, line)}: {text!r}"
        for path in source_files()
        if not str(path.relative_to(REPO)).startswith(ENGINE_STRING_HOMES)
        for line, text in engine_strings(path)
    ]
    assert found == []


def test_the_walk_sees_what_it_must() -> None:
    # the checks above would pass vacuously if the walk found nothing: it must see these
    stats = REPO / "loadgen" / "stats.py"
    assert "loadgen.records" in {m for _, m in imports(stats)}
    vllm_file = REPO / "infergauge" / "engines" / "vllm.py"
    assert any(text == "vllm" for _, text in engine_strings(vllm_file))
