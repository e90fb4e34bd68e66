"""`make deps` (issue 11 item 20): `make test` installs the Debian packages its tests need itself."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MISSING = "infergauge-no-such-package:infergauge-no-such-tool"


def _make(
    *args: str, env: dict[str, str] | None = None, user: int | None = None
) -> subprocess.CompletedProcess[str]:
    cmd = ["make", "-s", *args]
    if user is None:
        return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, env=env, timeout=60)
    cmd = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *cmd]
    # another user may not read the checkout (a clone in `mktemp -d` is 0700): give it a readable copy
    # of what `make deps` reads, the Makefile and .ci/
    with tempfile.TemporaryDirectory() as tmp:
        os.chmod(tmp, 0o755)
        shutil.copy(REPO / "Makefile", tmp)
        shutil.copytree(REPO / ".ci", Path(tmp) / ".ci")
        return subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, env=env, timeout=60)


def test_item20_nothing_to_do_when_every_tool_is_there() -> None:
    done = _make("deps", "DEPS=coreutils:sh bash:bash")
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root and setpriv")
def test_item20_not_root_names_the_missing_package_in_one_line() -> None:
    done = _make("deps", f"DEPS={MISSING} bash:bash", user=65534)
    assert done.returncode != 0
    lines = [x for x in done.stderr.splitlines() if x.startswith("make deps:")]
    assert lines == [
        "make deps: missing Debian package 'infergauge-no-such-package': run 'make deps' as root, "
        "or: sudo apt-get install infergauge-no-such-package"
    ]


@pytest.mark.skipif(os.geteuid() != 0, reason="the apt-get branch runs as root only")
def test_item20_root_installs_only_what_is_missing_with_apt_get(tmp_path: Path) -> None:
    log = tmp_path / "apt-get.log"
    fake = tmp_path / "bin" / "apt-get"  # a stand-in that records its arguments (no network, no install)
    fake.parent.mkdir()
    fake.write_text(f'#!/bin/sh\necho "$@" >> {log}\n')
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{fake.parent}:{os.environ['PATH']}"}
    done = _make("deps", f"DEPS={MISSING} bash:bash", env=env)
    assert done.returncode == 0, done.stderr
    calls = log.read_text().splitlines()
    assert calls[0] == "update -qq"
    assert calls[1].endswith("install -y -qq --no-install-recommends infergauge-no-such-package")


def test_item20_make_test_runs_deps_first_and_ci_runs_make_test_alone() -> None:
    plan = _make("-n", "test", "DEPS=bash:bash")
    assert plan.returncode == 0, plan.stderr
    steps = plan.stdout.splitlines()
    assert any(".ci/deps" in s for s in steps)
    assert next(i for i, s in enumerate(steps) if ".ci/deps" in s) < next(
        i for i, s in enumerate(steps) if "ruff check" in s
    )
    ci = (REPO / ".ci" / "run").read_text()
    assert "make test" in ci
    assert "promtool" not in ci
    assert "docker-compose" not in ci
