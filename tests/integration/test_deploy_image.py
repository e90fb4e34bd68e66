"""The Dockerfile builds a working image, proven without Docker: the build context as `.dockerignore`
leaves it, the wheel stage's files as its COPY lines place them, the wheel built from those files
alone (offline), installed into a fresh virtual environment, every module imported from it and each
console script's `--help` run. Dropping a package or build_hooks.py from the Dockerfile fails here."""

from __future__ import annotations

import re
import subprocess
import sys
import sysconfig
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import pytest

from tests.docker_context import BuildError, Stage, apply_copies, assemble_context, context_files, stages

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "Dockerfile"
PACKAGES = ("infergauge", "loadgen", "simengine", "exporter")  # pyproject's packages.find include
GENERATED = {"loadgen/_build_info.py"}  # written by build_hooks.py at build time, not in the checkout
DATA = (".json", ".yaml", ".yml", ".txt")  # pyproject's package-data
pytestmark = pytest.mark.xdist_group("image")  # two wheel builds at once would only slow each other


class WheelBuildFailed(AssertionError):
    """pip could not build a wheel from the stage's files."""


def wheel_stage(dockerfile: str) -> tuple[Stage, str]:
    """The stage that builds the package (`pip wheel .` or `pip install .`), and where it builds."""
    for stage in stages(dockerfile):
        for command, workdir in stage.runs:
            if re.search(r"pip (wheel|install)\b.* \.( |&|;|$)", command):
                return stage, workdir
    raise AssertionError("no stage of the Dockerfile builds the package (`pip wheel .`)")


def build_wheel(dockerfile: str, tmp: Path) -> Path:
    """The wheel the Dockerfile's wheel stage builds, from its COPY lines over the build context."""
    context = assemble_context(REPO, tmp / "context")
    stage, workdir = wheel_stage(dockerfile)
    rootfs = tmp / "rootfs"
    apply_copies(stage, context, rootfs)
    source = rootfs / PurePosixPath(workdir).relative_to("/")
    out = tmp / "wheels"
    # no network: the build backend is this venv's setuptools, dependencies are not fetched
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index"]
    result = subprocess.run(
        [*cmd, "--quiet", "--wheel-dir", str(out), str(source)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=tmp,
    )
    if result.returncode != 0:
        errors = [line.strip() for line in result.stderr.splitlines() if "Error" in line]
        raise WheelBuildFailed(" | ".join(errors) or result.stderr.strip() or "pip wheel failed")
    (wheel,) = out.glob("infergauge-*.whl")
    return wheel


def wheel_modules(wheel: Path) -> set[str]:
    """The .py files (and package data) the wheel holds, as paths."""
    with zipfile.ZipFile(wheel) as zf:
        return {n for n in zf.namelist() if n.split("/")[0] in PACKAGES}


def checkout_modules() -> set[str]:
    """What the wheel must hold: every module and data file of the checkout's packages."""
    found = {
        p.relative_to(REPO).as_posix()
        for package in PACKAGES
        for p in (REPO / package).rglob("*")
        if p.is_file() and p.suffix in (".py", *DATA) and "__pycache__" not in p.parts
    }
    return found - GENERATED


@dataclass(frozen=True)
class Installed:
    """The wheel installed into a fresh venv: its interpreter, bin dir and files."""

    wheel: Path
    python: Path
    bin: Path
    prefix: Path


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    tmp = tmp_path_factory.mktemp("image")
    wheel = build_wheel(DOCKERFILE.read_text(), tmp)
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    # The dependencies come from this venv's site-packages (a .pth after the fresh venv's own): only
    # infergauge's own packages must come from the wheel, and nothing is downloaded.
    purelib = Path(
        subprocess.check_output(
            [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], text=True
        ).strip()
    )
    (purelib / "zz_deps_from_test_venv.pth").write_text(sysconfig.get_path("purelib") + "\n")
    install = [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps"]
    subprocess.run([*install, "--no-index", str(wheel)], check=True, timeout=300)
    return Installed(wheel, python, venv / "bin", venv)


def test_wheel_holds_every_module_and_data_file(installed: Installed) -> None:
    missing = checkout_modules() - wheel_modules(installed.wheel)
    assert sorted(missing) == []


def test_every_module_imports_from_the_installed_wheel(installed: Installed, tmp_path: Path) -> None:
    modules = sorted(
        p.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
        for p in wheel_modules(installed.wheel)
        if p.endswith(".py") and not p.endswith("__main__.py")  # __main__ would run the program
    )
    assert len(modules) > 100
    script = (
        "import importlib, sys\n"
        "bad = []\n"
        "for name in sys.argv[1:]:\n"
        "    try:\n"
        "        mod = importlib.import_module(name)\n"
        "        if not mod.__file__.startswith(sys.prefix):\n"
        "            bad.append(f'{name}: from {mod.__file__}, not the installed wheel')\n"
        "    except Exception as exc:\n"
        "        bad.append(f'{name}: {type(exc).__name__}: {exc}')\n"
        "print('\\n'.join(bad))\n"
    )
    result = subprocess.run(
        [installed.python, "-I", "-c", script, *modules],  # -I: the checkout is not on the path
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=tmp_path,
        env={"MPLCONFIGDIR": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ""


def console_scripts(wheel: Path) -> list[str]:
    """The console scripts the wheel declares (entry_points.txt)."""
    with zipfile.ZipFile(wheel) as zf:
        name = next(n for n in zf.namelist() if n.endswith(".dist-info/entry_points.txt"))
        text = zf.read(name).decode()
    section = text.split("[console_scripts]", 1)[1].split("[", 1)[0]
    return sorted(line.split("=")[0].strip() for line in section.splitlines() if "=" in line)


def test_console_scripts_and_the_simulated_engine_answer_help(installed: Installed, tmp_path: Path) -> None:
    scripts = console_scripts(installed.wheel)
    assert scripts == ["infergauge-exporter", "loadgen"]
    commands = [[str(installed.bin / s), "--help"] for s in scripts]
    commands += [[str(installed.bin / "loadgen"), "run", "--help"]]
    commands += [[str(installed.python), "-m", "simengine", "--help"]]  # the compose simengine command
    for cmd in commands:
        result = subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            cwd=tmp_path,
            env={"MPLCONFIGDIR": str(tmp_path), "PATH": "/usr/bin:/bin"},
        )
        assert result.returncode == 0, f"{cmd}: {result.stderr}"
        assert "usage:" in result.stdout.lower(), cmd


def test_every_stage_finds_its_sources_in_the_context(tmp_path: Path) -> None:
    context = assemble_context(REPO, tmp_path / "context")
    assert not (context / ".venv").exists()
    assert not (context / ".git").exists()
    assert not list(context.rglob("__pycache__")), "the context carries bytecode caches"
    for n, stage in enumerate(stages(DOCKERFILE.read_text())):
        apply_copies(stage, context, tmp_path / f"stage{n}")


def without(dockerfile: str, source: str) -> str:
    """The Dockerfile with `source` taken out of its COPY lines (the line dropped when it was alone)."""
    out = []
    for line in dockerfile.splitlines():
        words = line.split()
        if words[:1] == ["COPY"] and source in words[1:-1]:
            kept = [w for w in words[1:-1] if w != source]
            if not kept:
                continue
            line = " ".join(["COPY", *kept, words[-1]])
        out.append(line)
    mutated = "\n".join(out)
    assert mutated != dockerfile, f"the Dockerfile copies no {source!r}"
    return mutated


def test_dropping_a_package_from_the_dockerfile_is_caught(tmp_path: Path) -> None:
    wheel = build_wheel(without(DOCKERFILE.read_text(), "infergauge"), tmp_path)
    missing = checkout_modules() - wheel_modules(wheel)
    assert "infergauge/__init__.py" in missing
    assert {m.split("/")[0] for m in missing} == {"infergauge"}


def test_dropping_the_build_hooks_from_the_dockerfile_is_caught(tmp_path: Path) -> None:
    with pytest.raises(WheelBuildFailed, match="build_hooks"):
        build_wheel(without(DOCKERFILE.read_text(), "build_hooks.py"), tmp_path)


def test_a_copy_of_something_the_context_lacks_is_a_build_error(tmp_path: Path) -> None:
    broken = DOCKERFILE.read_text().replace("COPY loadgen ", "COPY results ", 1)
    assert broken != DOCKERFILE.read_text()
    stage, _ = wheel_stage(broken)
    with pytest.raises(BuildError, match="results"):
        apply_copies(stage, assemble_context(REPO, tmp_path / "context"), tmp_path / "rootfs")


# docker-py's own .dockerignore matcher (Debian's python3-docker, which docker-compose brings), run by
# the system Python: the context above must be the one Docker's clients would send.
DOCKER_PY = "/usr/bin/python3"
DOCKER_PY_FILES = """
import os, sys
from docker.utils.build import exclude_paths
root = sys.argv[1]
with open(os.path.join(root, ".dockerignore")) as f:
    rules = [x.strip() for x in f if x.strip() and not x.startswith("#")]
print("\\n".join(sorted(p for p in exclude_paths(root, rules) if os.path.isfile(os.path.join(root, p)))))
"""


def test_the_context_is_the_one_docker_py_sends() -> None:
    probe = subprocess.run([DOCKER_PY, "-c", "import docker"], capture_output=True, check=False)
    if probe.returncode != 0:
        pytest.skip("no docker-py for /usr/bin/python3 (make deps installs docker-compose, which has it)")
    out = subprocess.run(
        [DOCKER_PY, "-c", DOCKER_PY_FILES, str(REPO)], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    ours = context_files(REPO, (REPO / ".dockerignore").read_text())
    assert ours == out.split()
    assert "build_hooks.py" in ours
    assert "infergauge/__init__.py" in ours


def test_the_image_keeps_the_dataclass_code_of_the_installed_wheel(
    installed: Installed, tmp_path: Path
) -> None:
    runtime = DOCKERFILE.read_text().rsplit("FROM ${PYTHON_IMAGE}", 1)[1]
    install = runtime.index("pip install /wheels/*.whl")
    assert runtime.index("python -m loadgen.cli.codecache") > install  # after the wheel, as root
    env = {"PATH": "/usr/bin:/bin", "PYTHONDONTWRITEBYTECODE": "1", "MPLCONFIGDIR": str(tmp_path)}
    done = subprocess.run(
        [str(installed.python), "-m", "loadgen.cli.codecache"],
        capture_output=True, text=True, timeout=120, check=False, cwd=tmp_path, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (written,) = installed.prefix.rglob("loadgen/cli/__pycache__/codecache.*.dataclasses")
    from loadgen.cli.codecache import GeneratedCode

    assert len(GeneratedCode(str(written)).known) >= 100  # the run path's generated methods
