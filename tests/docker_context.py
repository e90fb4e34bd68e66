"""A Docker build without Docker: the build context as `.dockerignore` leaves it, and each stage's
files as its `COPY` lines put them, so a test can build the wheel from exactly what an image gets.

`.dockerignore` follows moby/patternmatcher (what `docker build` uses): patterns are anchored at the
context root, `*` and `?` never cross `/`, `**` spans any number of directories, a pattern that
matches a directory excludes everything under it, `!` re-includes, and the last match wins.
`COPY` follows the Dockerfile reference: a directory source copies its contents, a destination
ending in `/` (or several sources) is a directory, relative destinations start at WORKDIR."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath


class BuildError(RuntimeError):
    """What `docker build` would stop on (a COPY source missing from the context)."""


@dataclass
class Stage:
    """One FROM ... of a Dockerfile: its name, its COPY lines (from the context) and RUN lines."""

    name: str | None
    copies: list[tuple[list[str], str, str]] = field(default_factory=list)  # (sources, dest, workdir)
    runs: list[tuple[str, str]] = field(default_factory=list)  # (command, workdir)


def instructions(dockerfile: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of each line, continuation lines joined and comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for raw in dockerfile.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue  # a comment inside a continued instruction
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        word, _, args = (pending + line).partition(" ")
        out.append((word.upper(), args.strip()))
        pending = ""
    return out


def _arguments(args: str) -> tuple[list[str], list[str]]:
    """(--flags, operands) of a COPY line, exec (JSON) or shell form."""
    words = json.loads(args) if args.startswith("[") else shlex.split(args)
    flags = [w for w in words if w.startswith("--")]
    return flags, [w for w in words if not w.startswith("--")]


def stages(dockerfile: str) -> list[Stage]:
    """The Dockerfile's stages in order; COPY --from=... lines (not from the context) are left out."""
    found: list[Stage] = []
    workdir = "/"
    for word, args in instructions(dockerfile):
        if word == "FROM":
            parts = args.split()
            found.append(Stage(parts[2] if len(parts) == 3 and parts[1].upper() == "AS" else None))
            workdir = "/"
        elif word == "WORKDIR":
            workdir = str(PurePosixPath(workdir, args))
        elif word in {"COPY", "ADD"}:
            flags, operands = _arguments(args)
            if not any(f.startswith("--from") for f in flags):
                found[-1].copies.append((operands[:-1], operands[-1], workdir))
        elif word == "RUN":
            found[-1].runs.append((args, workdir))
    return found


def _pattern_regex(pattern: str) -> re.Pattern[str]:
    """One .dockerignore pattern (already cleaned) as a regex over a context-relative path."""
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            out, i = out + ".*", i + 2
        elif pattern[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif pattern[i] == "?":
            out, i = out + "[^/]", i + 1
        elif pattern[i] == "[":
            end = pattern.index("]", i)
            out, i = out + "[" + pattern[i + 1 : end].replace("^", "\\^", 1) + "]", end + 1
        else:
            out, i = out + re.escape(pattern[i]), i + 1
    return re.compile(out)


def ignore_rules(dockerignore: str) -> list[tuple[bool, re.Pattern[str]]]:
    """(excludes, pattern) for each rule of a .dockerignore, in order."""
    rules = []
    for raw in dockerignore.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        text = os.path.normpath(line[1:].strip() if negate else line).lstrip("/")
        rules.append((not negate, _pattern_regex(text)))
    return rules


def ignored(path: str, rules: list[tuple[bool, re.Pattern[str]]]) -> bool:
    """Whether the context leaves out `path` (a rule matching the path or one of its parents)."""
    parts = path.split("/")
    prefixes = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    verdict = False
    for excludes, regex in rules:
        if any(regex.fullmatch(p) for p in prefixes):
            verdict = excludes
    return verdict


ALWAYS_SENT = {"Dockerfile", ".dockerignore"}  # the docker client sends these whatever the rules say


def context_files(root: Path, dockerignore: str) -> list[str]:
    """Every file the build context holds (paths relative to `root`, `/`-separated, sorted)."""
    rules = ignore_rules(dockerignore)
    out = []
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            rel = Path(dirpath, name).relative_to(root).as_posix()
            if rel in ALWAYS_SENT or not ignored(rel, rules):
                out.append(rel)
    return sorted(out)


def assemble_context(root: Path, dest: Path) -> Path:
    """Copy the build context of the checkout `root` (its .dockerignore applied) to `dest`."""
    ignore = root / ".dockerignore"
    for rel in context_files(root, ignore.read_text() if ignore.is_file() else ""):
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / rel, target)
    return dest


def apply_copies(stage: Stage, context: Path, rootfs: Path) -> None:
    """Run a stage's COPY lines from `context` into the directory `rootfs` (the stage's `/`)."""
    for sources, dest, workdir in stage.copies:
        to_dir = dest.endswith("/") or len(sources) > 1
        target = rootfs / PurePosixPath(workdir, dest).relative_to("/")
        for source in sources:
            src = context / source
            if not src.exists():
                raise BuildError(f"COPY {source}: not found in the build context")
            if src.is_dir():
                shutil.copytree(src, target, dirs_exist_ok=True)
            else:
                where = target / src.name if to_dir else target
                where.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(src, where)
