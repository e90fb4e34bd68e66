"""Issue #11 item 12: `tool.git_sha` is infergauge's own commit, never an enclosing repo's HEAD."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from loadgen.provenance import build_info_source, checkout_sha, is_own_checkout, project_name

REPO = Path(__file__).resolve().parents[2]
TOOL_INFO = "import json, loadgen; from loadgen.results.manifest import tool_info; " + (
    "print(json.dumps({**tool_info(), 'file': loadgen.__file__}))"
)


def _git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t"}
    env["GIT_COMMITTER_EMAIL"] = "t@t"
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True, env=env
    ).stdout.strip()


def _other_repo(tmp_path: Path) -> tuple[Path, str]:
    """A git repo of another project (its own pyproject) with one commit; (path, HEAD)."""
    outer = tmp_path / "other-project"
    outer.mkdir()
    (outer / "pyproject.toml").write_text('[project]\nname = "other-project"\nversion = "1.0"\n')
    _git(outer, "init", "-q")
    _git(outer, "add", "-A")
    _git(outer, "commit", "-qm", "other project")
    return outer, _git(outer, "rev-parse", "HEAD")


def _tool_info(pythonpath: Path, cwd: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    out = subprocess.run([sys.executable, "-c", TOOL_INFO], cwd=cwd, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _vendor(outer: Path) -> Path:
    """Copy infergauge (package + pyproject) to `outer/vendor/infergauge`, as projects vendor it."""
    root = outer / "vendor" / "infergauge"
    shutil.copytree(
        REPO / "loadgen", root / "loadgen", ignore=shutil.ignore_patterns("__pycache__", "_build_info.py")
    )
    shutil.copy(REPO / "pyproject.toml", root / "pyproject.toml")
    return root


def test_item12_own_checkout_records_its_head() -> None:
    if not (REPO / ".git").exists():
        pytest.skip("not run from a git checkout")
    assert checkout_sha(REPO / "loadgen") == _git(REPO, "rev-parse", "HEAD")


def test_item12_vendored_copy_inside_another_repo_records_no_foreign_head(tmp_path: Path) -> None:
    outer, outer_head = _other_repo(tmp_path)
    root = _vendor(outer)
    info = _tool_info(root, outer)
    assert info["file"] == str(root / "loadgen" / "__init__.py")
    assert info["git_sha"] != outer_head
    assert (info["git_sha"], info["git_sha_source"]) == (None, None)
    assert info["version"] == project_version()


def test_item12_vendored_copy_with_a_build_stamp_records_the_stamp(tmp_path: Path) -> None:
    outer, outer_head = _other_repo(tmp_path)
    root = _vendor(outer)
    stamp = "0123456789abcdef0123456789abcdef01234567"
    (root / "loadgen" / "_build_info.py").write_text(build_info_source(stamp))
    info = _tool_info(root, outer)
    assert (info["git_sha"], info["git_sha_source"]) == (stamp, "build")


def test_item12_a_checkout_counts_only_when_its_top_level_is_infergauge(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.x]\nname = "infergauge"\n[project]\nname = "other"\n')
    (tmp_path / "loadgen").mkdir()
    assert project_name((tmp_path / "pyproject.toml").read_text()) == "other"
    assert not is_own_checkout(tmp_path, tmp_path / "loadgen")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "infergauge"\n')
    assert is_own_checkout(tmp_path, tmp_path / "loadgen")
    assert not is_own_checkout(tmp_path, tmp_path / "vendor" / "loadgen")  # not its top-level package
    assert not is_own_checkout(tmp_path / "missing", tmp_path / "missing" / "loadgen")


def project_version() -> str:
    """The version in the checkout's pyproject.toml."""
    text = (REPO / "pyproject.toml").read_text()
    return text.split('version = "', 1)[1].split('"', 1)[0]


@pytest.mark.timeout(300)
def test_item12_a_wheel_carries_its_commit_into_a_copy_without_git(tmp_path: Path) -> None:
    if not (REPO / ".git").exists():
        pytest.skip("not run from a git checkout")
    clone = tmp_path / "clone"
    _git(tmp_path, "clone", "-q", "--no-hardlinks", str(REPO), str(clone))
    head = _git(clone, "rev-parse", "HEAD")
    wheels = tmp_path / "wheels"
    pip = [sys.executable, "-m", "pip", "-q"]
    subprocess.run(
        [*pip, "wheel", "--no-deps", "-w", str(wheels), str(clone)], check=True, capture_output=True
    )
    (wheel,) = wheels.glob("infergauge-*.whl")
    outer, outer_head = _other_repo(tmp_path)
    site = outer / "site"
    subprocess.run(
        [*pip, "install", "--no-deps", "--target", str(site), str(wheel)], check=True, capture_output=True
    )
    info = _tool_info(site, outer)
    assert info["file"] == str(site / "loadgen" / "__init__.py")
    assert (info["git_sha"], info["git_sha_source"]) == (head, "build")
    assert head != outer_head


def test_no_git_process_where_the_package_is_no_checkouts_top_level_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An installed or vendored copy (its parent holds no `.git`) never runs git; a directory that does
    hold one still asks git (and counts only when it is infergauge's, as above)."""
    import loadgen.provenance as provenance

    runs: list[tuple[str, ...]] = []

    def fake_git(cwd: Path, *args: str) -> str | None:
        runs.append(args)
        return f"{cwd.parent}\n{'a' * 40}"

    monkeypatch.setattr(provenance, "_git", fake_git)
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "infergauge"\n')
    (tmp_path / "loadgen").mkdir()
    assert checkout_sha(tmp_path / "loadgen") is None
    assert runs == []
    (tmp_path / ".git").write_text("gitdir: /elsewhere/.git/worktrees/x\n")  # a worktree's .git file
    assert checkout_sha(tmp_path / "loadgen") == "a" * 40
    assert runs == [("rev-parse", "--show-toplevel", "HEAD")]
