"""The layering the design promises, held by an `ast` walk over every import (top level and inside
functions) and every string constant of the shipped code.

- loadgen's layers import only their own layer or lower ones:
  base (records, stats, config, provenance, workload, jsonbytes) < transport < targets < results + store
  < run < scale < analysis < experiments < baseline < report < cli; nothing outside loadgen/cli imports
  the CLI;
- records, stats and analysis import no transport and no aiohttp (`import loadgen.stats` works
  without aiohttp installed);
- the exporter imports nothing of loadgen; the simulated engine nothing of loadgen or the exporter;
- infergauge/ (what every binary shares) imports only the standard library;
- the registered engines' names (and metric prefixes) appear in string constants (anywhere inside
  them: PromQL, help text, messages) only in the engine files and the simulated engine, and in
  YAML/JSON only in files the generator writes from the engine files, in user examples and
  deployment settings, and in test fixtures: everything else asks the engine registry.

Imports count in every form: `import a.b`, `from a import b` (the module `a.b` when `b` is one),
relative imports, and `importlib.import_module("a.b")` / `__import__("a.b")` with a constant name.
Indirect imports count too: the analysis layer must import with aiohttp unavailable, through
whatever it imports. Each check has a test of its own that plants the break it must catch.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("loadgen", "exporter", "simengine", "infergauge", "grafana", "bench")

# loadgen's layers, lowest first; a module may import its own layer or a lower one
LAYERS: tuple[tuple[str, ...], ...] = (
    ("", "records", "stats", "config", "provenance", "workload", "prefix_cache", "jsonbytes"),
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
ENGINE_STRING_HOMES = ("infergauge/engines/", "simengine/")
# what may name an engine without being engine knowledge: the peer tools' names
ENGINE_STRING_PHRASES = ("vllm bench serve", "vllm-bench")
# YAML/JSON naming engines: generated from the engine files (`python -m grafana.dashgen --check`
# fails on drift), user examples and deployment settings, the promtool tests' inputs, fixtures
ENGINE_DATA_HOMES = (
    "grafana/dashboards/",
    "prometheus/rules/engines.yml",
    "prometheus/prometheus.yml",
    "prometheus/prometheus.local.yml",
    "prometheus/tests/",
    "examples/",
    "deploy/",
    "docker-compose.yml",
    "tests/",
    "simengine/",
    "mkdocs.yml",
)
sys.path.insert(0, str(REPO))
from infergauge import engines as _engines  # noqa: E402

ENGINE_NAMES = tuple(name for name, spec in _engines.ENGINES.items() if not spec.plays)


def engine_pattern(names: tuple[str, ...] = ENGINE_NAMES) -> re.Pattern[str]:
    """An engine name as a word anywhere in a text (`vllm:num_requests_running`, `vLLM's`, `sglang`)."""
    return re.compile(r"(?<![A-Za-z0-9_])(" + "|".join(map(re.escape, names)) + r")(?![A-Za-z0-9_])", re.I)


def source_files() -> Iterator[Path]:
    for package in PACKAGES:
        yield from sorted((REPO / package).rglob("*.py"))


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


DYNAMIC_IMPORTS = {"import_module", "__import__"}


def _dynamic(node: ast.AST) -> str | None:
    """The constant module name of `importlib.import_module("x")` / `__import__("x")`, else None."""
    if not isinstance(node, ast.Call) or not node.args:
        return None
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    arg = node.args[0]
    if name in DYNAMIC_IMPORTS and isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    return None


def imports_in(source: str, module: str, is_package: bool = False) -> Iterator[tuple[int, str]]:
    """(line, absolute module) of every import in a module's source: `from a import b` gives `a`
    and `a.b`, relative imports are resolved, constant dynamic imports count."""
    package = module if is_package else module.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                found = f"{base}.{node.module}" if node.module else base
            elif node.module:
                found = node.module
            else:
                continue
            yield node.lineno, found
            for alias in node.names:  # `from loadgen import cli` imports the module loadgen.cli
                if alias.name != "*":
                    yield node.lineno, f"{found}.{alias.name}"
        elif (dynamic := _dynamic(node)) is not None:
            yield node.lineno, dynamic


def imports(path: Path) -> Iterator[tuple[int, str]]:
    """(line, absolute module) of every import in the file."""
    yield from imports_in(path.read_text(), module_name(path), path.name == "__init__.py")


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


def import_without_aiohttp(modules: list[str]) -> subprocess.CompletedProcess[str]:
    """Import the modules in a fresh interpreter where `import aiohttp` fails (indirect imports too)."""
    code = "import sys; sys.modules['aiohttp'] = None\n" + "".join(f"import {m}\n" for m in modules)
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)


def test_the_layers_below_transport_and_the_analysis_import_without_aiohttp() -> None:
    # records, stats, config, provenance, workload (below transport) and every analysis module, through
    # whatever they import (issue #24 item 4: EngineMetadata was imported from a file importing aiohttp)
    below = [
        module_name(p)
        for p in sorted((REPO / "loadgen").rglob("*.py"))
        if RANK[loadgen_layer(module_name(p))] == 0
    ]
    analysis = sorted(module_name(p) for p in (REPO / "loadgen" / "analysis").rglob("*.py"))
    done = import_without_aiohttp([*below, *analysis])
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("part", ["loadgen/results", "loadgen/store"])
def test_http_clients_live_in_the_layers_that_talk_to_servers(part: str) -> None:
    # the run record and the store are files and SQL; HTTP clients are transport/ and targets/
    found = [
        f"{where(path, line)} imports {module}"
        for path in sorted((REPO / part).rglob("*.py"))
        for line, module in imports(path)
        if module.split(".")[0] == "aiohttp"
    ]
    assert found == []


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


def engine_strings_in(source: str) -> Iterator[tuple[int, str]]:
    """String constants naming an engine anywhere inside them (docstrings and the peer tools' names
    left out: prose may name them)."""
    pattern = engine_pattern()
    tree = ast.parse(source)
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
            bare = text
            for phrase in ENGINE_STRING_PHRASES:
                bare = re.sub(re.escape(phrase), "", bare, flags=re.I)
            if pattern.search(bare):
                yield node.lineno, text


def engine_strings(path: Path) -> Iterator[tuple[int, str]]:
    """`engine_strings_in` of a file."""
    yield from engine_strings_in(path.read_text())


def data_files() -> Iterator[Path]:
    """Every YAML and JSON file of the repository (the virtualenv and build output left out)."""
    for suffix in ("*.yml", "*.yaml", "*.json"):
        for path in REPO.rglob(suffix):
            rel = path.relative_to(REPO).parts
            if (
                rel[0] not in (".venv", "site", "build", "results", ".git", ".devcarry")
                and ".venv" not in rel
            ):
                yield path


def engine_names_in_data(text: str) -> list[str]:
    """The engine names a YAML/JSON text holds (as words anywhere: keys, values, PromQL)."""
    return sorted({m.group(1).lower() for m in engine_pattern().finditer(text)})


def test_engine_names_in_yaml_and_json_only_where_generated_or_user_settings() -> None:
    found = [
        f"{path.relative_to(REPO)}: {names}"
        for path in data_files()
        if not str(path.relative_to(REPO)).startswith(ENGINE_DATA_HOMES)
        and (names := engine_names_in_data(path.read_text(encoding="utf-8", errors="replace")))
    ]
    assert found == []


def test_engine_names_live_in_the_engine_files() -> None:
    found = [
        f"{where(path, line)}: {text!r}"
        for path in source_files()
        if not str(path.relative_to(REPO)).startswith(ENGINE_STRING_HOMES)
        for line, text in engine_strings(path)
    ]
    assert found == []


def test_the_checks_catch_the_breaks_they_are_for() -> None:
    # a test of the test: each realistic break is planted in a source text and must be found
    promql = 'expr = "sum by (job) (vllm:num_requests_running)"\nhelp = "is SGLang up?"\n'
    assert [t for _, t in engine_strings_in(promql)] == [
        "sum by (job) (vllm:num_requests_running)",
        "is SGLang up?",
    ]
    assert list(engine_strings_in('"""vLLM in a docstring is prose."""\nx = "vllm bench serve --x"\n')) == []
    planted = {
        "from loadgen import cli\n": "loadgen.cli",
        "import importlib\nimportlib.import_module('loadgen.cli.run')\n": "loadgen.cli.run",
        "__import__('loadgen.cli')\n": "loadgen.cli",
        "from ..cli import run\n": "loadgen.cli.run",
    }
    for source, module in planted.items():
        seen = {m for _, m in imports_in(source, "loadgen.analysis.fake")}
        assert module in seen, (source, seen)
    assert engine_names_in_data('groups: [{expr: "max(sglang:token_usage) > 0.9"}]') == ["sglang"]
    assert engine_names_in_data('{"title": "Run comparison"}') == []
    # an indirect aiohttp import (analysis -> a module that imports aiohttp) fails the import check
    broken = import_without_aiohttp(["loadgen.transport.stamping"])
    assert broken.returncode != 0
    assert "aiohttp" in broken.stderr


def test_the_walk_sees_what_it_must() -> None:
    # the checks above would pass vacuously if the walk found nothing: it must see these
    stats = REPO / "loadgen" / "stats.py"
    assert "loadgen.records" in {m for _, m in imports(stats)}
    vllm_file = REPO / "infergauge" / "engines" / "vllm.py"
    assert any(text == "vllm" for _, text in engine_strings(vllm_file))
