"""The deployment guides are copy-paste correct: every shell block of docs/compose.md,
docs/kubernetes.md and docs/ci.md is run here, in order, in one shell, in a copy of the repository,
except the commands that need what this machine lacks (Docker, a cluster, a registry, root on a
baseline host). Those are skipped by an explicit rule naming the reason, and reported as a warning
listing each skipped command; a command no rule knows fails the test. `kubectl create` lines run with
`--dry-run=client -o yaml`, `docker compose` lines as Debian's `docker-compose`."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import textwrap
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DOCS = ("compose.md", "kubernetes.md", "ci.md")
COPIED = ("deploy", "prometheus", "grafana", "docker-compose.yml", "Dockerfile", ".dockerignore")
BLOCK = re.compile(r"^( *)```bash\n(.*?)^\1```", re.M | re.S)
ENV_PREFIX = re.compile(r"^(?:[A-Z_][A-Z0-9_]*=\S*\s+)+")
# (pattern on the command, with any leading VAR=value dropped; why it cannot run here)
SKIPPED = (
    (r"docker (build|push)\b", "needs Docker and a registry"),
    (r"docker image\b", "needs Docker"),
    (r"docker compose (.*\s)?(up|run|pull|down)\b", "needs Docker"),
    (r"kubectl (-n \S+ )?(apply|delete|wait|logs|rollout)\b", "needs a cluster"),
    (r"loadgen run .*--store postgresql://\S*@127\.0\.0\.1", "needs the compose stack's PostgreSQL"),
    (r"prometheus --config\.file", "starts a long-running server"),
    (r"gh secret set\b", "needs a GitHub repository and token"),
    (r"(python3 -m venv /opt/|install |printf .*> /etc/|cp .* /etc/|systemctl )", "needs root on the host"),
)
# (pattern; how it runs here)
RUNNABLE = (
    r"kubectl kustomize ",
    r"kubectl (-n \S+ )?create ",
    r"docker compose (.*\s)?config\b",
    r"(export |mkdir |cat > |sed -i |systemd-analyze calendar )",
)


@dataclass(frozen=True)
class Command:
    """One command of a shell block (continuations joined, a here-document kept whole)."""

    text: str
    doc: str

    @property
    def bare(self) -> str:
        """The command without leading VAR=value assignments."""
        return ENV_PREFIX.sub("", self.text)


def commands(doc: str) -> list[Command]:
    """Every command of every ```bash block of docs/<doc>, in order."""
    found: list[Command] = []
    for _indent, body in BLOCK.findall((REPO / "docs" / doc).read_text()):
        lines = textwrap.dedent(body).splitlines()
        i = 0
        while i < len(lines):
            line = lines[i]
            i += 1
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            while line.endswith("\\") and i < len(lines):
                line, i = line[:-1] + " " + lines[i].strip(), i + 1
            heredoc = re.search(r"<<'?(\w+)'?", line)
            if heredoc:
                end = lines.index(heredoc.group(1), i)
                line, i = "\n".join([line, *lines[i : end + 1]]), end + 1
            found.append(Command(line, doc))
    return found


def skip_reason(command: Command) -> str | None:
    """Why the command cannot run here; None when it runs. A command no rule knows is an error."""
    for pattern, why in SKIPPED:
        if re.match(pattern, command.bare):
            return why
    if any(re.match(pattern, command.bare) for pattern in RUNNABLE):
        return None
    raise AssertionError(f"docs/{command.doc}: no rule says how to check {command.text!r}")


def runnable(command: Command) -> str:
    """The shell text that runs the command here."""
    text = command.text.replace("docker compose ", "docker-compose ")
    if re.match(r"kubectl (-n \S+ )?create ", command.bare):
        text += " --dry-run=client -o yaml"
    return text


EXAMPLE_ENV = {  # the values the guides ask the reader to set first
    "STORE_URL": "postgresql://infergauge:example-only@db.example.com:5432/infergauge",
    "ENGINE_API_KEY": "example-only-token",
}


def run_doc(doc: str, tmp_path: Path) -> tuple[list[tuple[Command, str]], list[tuple[Command, str]]]:
    """Run a guide's commands in one `bash -euo pipefail` in a copy of the repository: (ran, output)
    and (skipped, reason) pairs."""
    work = tmp_path / "repo"
    for name in COPIED:
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, work / name)
        else:
            work.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, work / name)
    ran, skipped, script = [], [], ["set -euo pipefail"]
    for command in commands(doc):
        why = skip_reason(command)
        if why is not None:
            skipped.append((command, why))
            continue
        script += [f"echo '@@@ {len(ran)}'", runnable(command)]
        ran.append(command)
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(tmp_path), **EXAMPLE_ENV}
    result = subprocess.run(
        ["bash", "-c", "\n".join(script)],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, f"docs/{doc}: {result.stderr.strip()}\n{result.stdout[-2000:]}"
    parts = re.split(r"^@@@ \d+\n", result.stdout, flags=re.M)[1:]
    assert len(parts) == len(ran)
    return list(zip(ran, parts, strict=True)), skipped


@pytest.mark.parametrize("doc", DOCS)
def test_every_runnable_command_of_the_guide_runs(doc: str, tmp_path: Path) -> None:
    ran, skipped = run_doc(doc, tmp_path)
    assert len(ran) >= 1
    # visible, never silent: each command not run here and why
    warnings.warn(
        f"docs/{doc}: {len(ran)} commands ran; {len(skipped)} skipped: "
        + "; ".join(f"{c.text.splitlines()[0]!r} ({why})" for c, why in skipped),
        stacklevel=1,
    )


def test_an_unknown_command_is_an_error_not_a_skip() -> None:
    with pytest.raises(AssertionError, match="no rule says how to check"):
        skip_reason(Command("curl http://example.com", "x.md"))
    assert skip_reason(Command("MODEL=x docker compose --profile vllm up -d", "x.md")) == ("needs Docker")
    assert skip_reason(Command("docker compose --profile gpu config -q", "x.md")) is None


def created(outputs: list[tuple[Command, str]]) -> dict[tuple[str, str], set[str]]:
    """(kind, name) -> keys of every Secret and ConfigMap the guide's `kubectl create` lines make."""
    out: dict[tuple[str, str], set[str]] = {}
    for command, text in outputs:
        if re.match(r"kubectl (-n \S+ )?create (secret|configmap) ", command.bare):
            obj = yaml.safe_load(text)
            out[(obj["kind"], obj["metadata"]["name"])] = set(obj.get("data") or {})
            assert obj["metadata"]["namespace"] == "infergauge", command.text
    return out


def referenced(overlay: str) -> set[tuple[str, str, str]]:
    """(kind, name, key) of every Secret and hand-made ConfigMap an overlay's pods read."""
    kubectl = Path(sys.executable).parent / "kubectl"
    rendered = subprocess.run(
        [str(kubectl), "kustomize", str(REPO / "deploy" / "kubernetes" / "overlays" / overlay)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    refs: set[tuple[str, str, str]] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for kind, key in (("Secret", "secretKeyRef"), ("ConfigMap", "configMapKeyRef")):
                if key in node:
                    refs.add((kind, node[key]["name"], node[key]["key"]))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    for obj in yaml.safe_load_all(rendered):
        walk(obj)
    # configMapGenerator's (name-<hash>), made by kustomize itself
    generated = re.compile(r"(loadgen-run|loadgen-run-config|infergauge-baseline-suite)-[a-z0-9]{10}")
    return {r for r in refs if not generated.fullmatch(r[1])}


def test_the_kubernetes_guide_creates_every_secret_and_configmap_the_pods_read(tmp_path: Path) -> None:
    ran, _ = run_doc("kubernetes.md", tmp_path)
    made = created(ran)
    needed = referenced("prometheus-operator") | referenced("loadgen-shards")
    assert ("Secret", "infergauge-exporter", "engine-api-key") in needed
    missing = {r for r in needed if r[2] not in made.get((r[0], r[1]), set())}
    assert missing == set()


def test_the_kubernetes_guide_pins_the_image_in_an_overlay_of_the_users(tmp_path: Path) -> None:
    ran, _ = run_doc("kubernetes.md", tmp_path)
    outputs = [text for command, text in ran if command.bare.startswith("kubectl kustomize my-")]
    assert len(outputs) >= 2
    # kubectl's built-in kustomize has no `edit`: no step may need the kustomize binary
    assert [c.text for doc in DOCS for c in commands(doc) if "kustomize edit" in c.text] == []
    for path in (REPO / "deploy").rglob("*"):
        if path.is_file():
            assert "kustomize edit set" not in path.read_text(), path
