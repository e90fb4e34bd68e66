"""A cache of the methods `dataclasses` generates, kept beside the bytecode cache (start-up cost, #23).

Each `@dataclass` writes the source of its `__init__`, `__repr__`, `__eq__` (and, frozen, `__setattr__`,
`__delattr__`, `__hash__`) and compiles it with `exec` as the class is created. The `loadgen run` path
creates 46 dataclasses at import: 264 compilations, 20-26 ms of CPU on the development VM (80% of the
dataclasses' cost), more on the H200 host, in every process. The source is the same from one process to
the next, so its compiled code can be kept the way Python keeps a module's: `GeneratedCode` stands in
for the `exec` that `dataclasses` calls, compiles a source it has not seen exactly as `exec` would
(`compile(source, "<string>", "exec", dont_inherit=True)`: dataclasses.py has no `__future__` imports
to pass on), and looks the others up. The cache file sits in the `__pycache__` this module's bytecode
goes to (`importlib.util.cache_from_source`, so `PYTHONPYCACHEPREFIX` is honoured), named for the
interpreter (`cache_tag`) and checked against its bytecode magic number; nothing is written where
bytecode is not (`PYTHONDONTWRITEBYTECODE`), and a file that cannot be read or written is left alone:
the classes compile as before. Only the console script (`loadgen.cli.console`) installs it.
"""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
import importlib.util
import marshal
import os
import sys
from types import CodeType
from typing import Any

HEADER = importlib.util.MAGIC_NUMBER + b"loadgen-dataclasses\n"
KEEP_FACTOR = 4  # entries not used this process are dropped once the file holds this many times the used


def cache_path() -> str | None:
    """Where this interpreter keeps the cache (None where bytecode has no cache location)."""
    try:
        pyc = importlib.util.cache_from_source(__file__)
    except (NotImplementedError, ValueError):  # cache_tag is None
        return None
    return pyc[: -len(".pyc")] + ".dataclasses" if pyc.endswith(".pyc") else None


class GeneratedCode:
    """The compiled methods of dataclasses, by their exact source (see the module docstring)."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self.known: dict[str, CodeType] = {}  # from the file
        self.used: dict[str, CodeType] = {}  # looked up or compiled in this process
        self.compiled = 0  # sources this process compiled (not in the file)
        self.saved = 0  # of those, how many the file holds since this process wrote it
        self.installed = False
        if path is not None:
            self.known = _read(path)

    def install(self) -> None:
        """Have `dataclasses` execute its generated source through `run` (a module global named
        `exec` is found before the builtin)."""
        if not self.installed:
            dataclasses.exec = self.run  # type: ignore[attr-defined]
            self.installed = True

    def uninstall(self) -> None:
        """`dataclasses` compiles with the builtin `exec` again."""
        if self.installed:
            with contextlib.suppress(AttributeError):
                del dataclasses.exec  # type: ignore[attr-defined]
            self.installed = False

    def run(self, source: Any, globals_: Any = None, locals_: Any = None) -> None:
        """`exec(source, globals_, locals_)` with the source's code from the cache when it is there."""
        if not isinstance(source, str):
            builtins.exec(source, globals_, locals_)
            return
        code = self.used.get(source) or self.known.get(source)
        if code is None:
            code = compile(source, "<string>", "exec", dont_inherit=True)
            self.compiled += 1
        self.used[source] = code
        builtins.exec(code, globals_, locals_)

    def save(self, force: bool = False) -> bool:
        """Write the cache when this process compiled something new (True when written): what the
        file held and what was used, or only what was used once the rest outgrows it (old versions'
        methods do not pile up). Not where Python writes no bytecode, unless `force`d."""
        if self.compiled == self.saved or self.path is None or (sys.dont_write_bytecode and not force):
            return False
        entries = {**self.known, **self.used}
        if len(entries) > KEEP_FACTOR * max(len(self.used), 1):
            entries = dict(self.used)
        tmp = f"{self.path}.{os.getpid()}.tmp"
        try:
            data = HEADER + marshal.dumps(entries)
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            with open(tmp, "wb") as fh:
                fh.write(data)
            os.replace(tmp, self.path)
        except (OSError, ValueError):  # read-only, a full disk, unmarshallable: the next one compiles
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            return False
        self.known, self.saved = entries, self.compiled
        return True


def _read(path: str) -> dict[str, CodeType]:
    """The cache file's entries; none when it is missing, another interpreter's, or unreadable."""
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError:
        return {}
    if not data.startswith(HEADER):
        return {}
    try:
        entries = marshal.loads(data[len(HEADER) :])
    except (EOFError, ValueError, TypeError):
        return {}
    if not isinstance(entries, dict):
        return {}
    return {k: v for k, v in entries.items() if isinstance(k, str) and isinstance(v, CodeType)}


def main(argv: list[str] | None = None) -> int:
    """`python -m loadgen.cli.codecache [MODULE...]`: import the modules (default: what `loadgen run`
    imports) and write their dataclasses' compiled methods, even where Python writes no bytecode on
    import (as `compileall` does); for installs and images built ahead of their first run."""
    import importlib

    names = (argv if argv is not None else sys.argv[1:]) or list(RUN_MODULES)
    code = GeneratedCode(cache_path())
    code.install()
    try:
        for name in names:
            importlib.import_module(name)
    finally:
        code.uninstall()
    if code.path is None:
        print("codecache: this interpreter keeps no bytecode cache; nothing written", file=sys.stderr)
        return 1
    if not code.save(force=True) and code.compiled:
        print(f"codecache: could not write {code.path}", file=sys.stderr)
        return 1
    print(f"codecache: {len(code.used)} generated methods ({code.compiled} compiled now) in {code.path}")
    return 0


RUN_MODULES = ("loadgen.cli.main", "loadgen.cli.run", "loadgen.run.runner", "loadgen.run.steps")

if __name__ == "__main__":
    raise SystemExit(main())
