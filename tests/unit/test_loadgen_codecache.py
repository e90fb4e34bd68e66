"""The dataclass code cache (loadgen.cli.codecache): classes made through it behave as the builtin
`exec` makes them, a second process compiles nothing, and a missing, foreign or unwritable cache
costs nothing but the compilations (the classes come out the same)."""

from __future__ import annotations

import dataclasses
import marshal
import os
import subprocess
import sys
from pathlib import Path

import pytest

from loadgen.cli import codecache
from loadgen.cli.codecache import HEADER, GeneratedCode

REPO = Path(__file__).resolve().parents[2]


def _make_classes() -> tuple[type, type]:
    @dataclasses.dataclass(frozen=True)
    class Point:
        """A frozen one (hash, setattr and delattr generated)."""

        x: int
        y: int = 2
        tags: tuple[str, ...] = ()

    @dataclasses.dataclass
    class Box:
        """A plain one with a default factory and a field left out of init."""

        name: str
        items: list[int] = dataclasses.field(default_factory=list)
        seen: int = dataclasses.field(default=0, init=False)

    return Point, Box


def _check(point: type, box: type) -> None:
    p = point(1)
    assert p == point(1, 2, ())
    assert p != point(1, 3)
    assert repr(p) == "_make_classes.<locals>.Point(x=1, y=2, tags=())"
    assert hash(p) == hash(point(1))
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.x = 5  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        del p.y  # type: ignore[misc]
    a, b = box("a"), box("b")
    a.items.append(1)
    assert b.items == []
    assert a.seen == 0
    assert a == box("a", [1])
    assert [f.name for f in dataclasses.fields(a)] == ["name", "items", "seen"]
    with pytest.raises(TypeError):
        box("a", [], 1)  # `seen` is no init parameter


def _through(code: GeneratedCode, check: bool) -> None:
    """Make the test's classes with `code` installed (and check them), then uninstall it."""
    code.install()
    try:
        classes = _make_classes()
        if check:
            _check(*classes)
    finally:
        code.uninstall()


def test_classes_come_out_the_same_and_a_second_process_compiles_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    path = str(tmp_path / "cache.dataclasses")
    first = GeneratedCode(path)
    _through(first, check=True)
    assert first.compiled >= 8  # init, repr, eq, setattr, delattr, hash; init, repr, eq
    assert not hasattr(dataclasses, "exec")  # uninstalled: the builtin again
    assert first.save(), "the cache was not written"
    second = GeneratedCode(path)
    assert len(second.known) == first.compiled
    _through(second, check=True)
    assert second.compiled == 0
    assert len(second.used) == len(second.known)
    assert not second.save()  # nothing new: the file is left as it is


def test_no_file_is_written_where_python_writes_no_bytecode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    code = GeneratedCode(str(tmp_path / "cache.dataclasses"))
    _through(code, check=False)
    assert code.compiled
    assert not code.save()
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    "content",
    [b"", b"not a cache", HEADER + b"\xff\x00garbage", HEADER + marshal.dumps([1, 2]),
     b"\x00\x00\x0d\x0a" + HEADER[4:] + marshal.dumps({})],  # another interpreter's magic number
    ids=["empty", "text", "torn", "no-dict", "foreign"],
)  # fmt: skip
def test_an_unusable_file_is_ignored_and_rewritten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: bytes
) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    path = tmp_path / "cache.dataclasses"
    path.write_bytes(content)
    code = GeneratedCode(str(path))
    assert code.known == {}
    _through(code, check=True)
    assert code.save()
    assert len(GeneratedCode(str(path)).known) == code.compiled


def test_an_unwritable_place_costs_nothing_but_the_compilations(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    (tmp_path / "a-file").write_text("")  # the cache's folder cannot be made (root or not)
    code = GeneratedCode(str(tmp_path / "a-file" / "__pycache__" / "cache.dataclasses"))
    _through(code, check=True)
    assert not code.save()
    assert [p.name for p in tmp_path.iterdir()] == ["a-file"]


def test_a_full_disk_leaves_no_temp_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    code = GeneratedCode(str(tmp_path / "cache.dataclasses"))
    _through(code, check=False)

    def full(*_args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(codecache.os, "replace", full)
    assert not code.save()
    assert not list(tmp_path.iterdir())


def test_old_entries_are_dropped_once_they_outgrow_the_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    path = tmp_path / "cache.dataclasses"
    stale = {f"# an old version's method {i}\n": compile("pass", "<string>", "exec") for i in range(200)}
    path.write_bytes(HEADER + marshal.dumps(stale))
    code = GeneratedCode(str(path))
    _through(code, check=False)
    assert code.save()
    kept = GeneratedCode(str(path)).known
    assert set(kept) == set(code.used)  # 200 unused > 4 x used: only the used are kept
    few = {k: v for i, (k, v) in enumerate(stale.items()) if i < 3}
    path.write_bytes(HEADER + marshal.dumps(few))
    code = GeneratedCode(str(path))
    _through(code, check=False)
    assert code.save()
    assert set(GeneratedCode(str(path)).known) == set(few) | set(code.used)  # a few stay


def _env(prefix: Path, **more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {**env, "PYTHONPYCACHEPREFIX": str(prefix), **more}


def test_the_module_writes_the_run_paths_cache_even_without_bytecode(tmp_path: Path) -> None:
    env = _env(tmp_path, PYTHONDONTWRITEBYTECODE="1")
    cmd = [sys.executable, "-m", "loadgen.cli.codecache"]
    first = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env=env, timeout=120)
    assert first.returncode == 0, first.stderr
    (written,) = list(tmp_path.rglob("codecache.*.dataclasses"))  # under the prefix, as bytecode is
    count = int(first.stdout.split("codecache: ", 1)[1].split()[0])
    assert count >= 100  # the run path's dataclasses' methods
    assert f"({count} compiled now)" in first.stdout
    second = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env=env, timeout=120)
    assert "(0 compiled now)" in second.stdout
    assert len(GeneratedCode(str(written)).known) == count


def test_the_console_script_saves_what_a_command_compiled(tmp_path: Path) -> None:
    code = "import sys\nfrom loadgen.cli.console import console\n"
    code += "sys.argv = ['loadgen', 'run', '--help']\nconsole()\n"
    cmd = [sys.executable, "-c", code]

    def console(**env: str) -> None:
        done = subprocess.run(
            cmd, capture_output=True, text=True, cwd=REPO, env=_env(tmp_path, **env), timeout=120
        )
        assert done.returncode == 0, done.stderr
        assert "--rate" in done.stdout

    console(PYTHONDONTWRITEBYTECODE="1")
    assert not list(tmp_path.rglob("codecache.*.dataclasses"))  # no bytecode written: no cache either
    console()
    (written,) = list(tmp_path.rglob("codecache.*.dataclasses"))
    assert len(GeneratedCode(str(written)).known) >= 100
