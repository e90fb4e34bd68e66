"""docker-compose.yml: valid for Debian's docker-compose 1.29 (default and `gpu` profiles), exact
image versions, loopback ports, GPUs only in profiles, a results volume the image's user can write,
every provisioned Grafana and Prometheus path present, listen addresses said explicitly."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
COMPOSE = REPO / "docker-compose.yml"
DOCKER_COMPOSE = shutil.which("docker-compose")


def compose_config(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    assert DOCKER_COMPOSE, "docker-compose is not installed (.ci/run installs Debian's)"
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("GRAFANA_", "COMPOSE_"))}
    return subprocess.run(
        [DOCKER_COMPOSE, "-f", str(COMPOSE), *args],
        cwd=REPO,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture(scope="module")
def resolved() -> dict:
    """The compose file as docker-compose resolves it (anchors merged, variables interpolated)."""
    profiles = [
        arg for p in ("gpu", "dcgm", "vllm", "sglang", "loadgen", "baselines") for arg in ("--profile", p)
    ]
    result = compose_config({"GRAFANA_ADMIN_PASSWORD": "pw-for-test"}, *profiles, "config")
    assert result.returncode == 0, result.stderr
    return yaml.safe_load(result.stdout)


def test_docker_compose_config_is_valid() -> None:
    result = compose_config({"GRAFANA_ADMIN_PASSWORD": "pw-for-test"}, "config", "-q")
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""


def test_config_is_valid_without_a_grafana_password() -> None:
    # `docker-compose config -q` is the README's plain check: it must not need a secret set
    result = compose_config({}, "config", "-q")
    assert result.returncode == 0, result.stderr
    resolved_env = yaml.safe_load(compose_config({}, "config").stdout)["services"]["grafana"]["environment"]
    assert (
        resolved_env["GF_SECURITY_ADMIN_PASSWORD"] == ""
    )  # Grafana ignores it: admin/admin, changed at login


def test_no_grafana_password_is_written_in_the_file() -> None:
    env = yaml.safe_load(COMPOSE.read_text())["services"]["grafana"]["environment"]
    assert env["GF_SECURITY_ADMIN_PASSWORD"] == "${GRAFANA_ADMIN_PASSWORD:-}"


def test_default_services_and_profiles(resolved: dict) -> None:
    raw = yaml.safe_load(COMPOSE.read_text())["services"]
    default = {name for name, svc in raw.items() if "profiles" not in svc}
    assert default == {"prometheus", "grafana", "exporter", "simengine"}
    assert {name: svc["profiles"] for name, svc in raw.items() if "profiles" in svc} == {
        "exporter-gpu": ["gpu"],
        "dcgm-exporter": ["dcgm"],
        "vllm": ["vllm"],
        "sglang": ["sglang"],
        "loadgen": ["loadgen"],
        "postgres": ["baselines"],
    }
    assert set(resolved["services"]) == set(raw)


# name:TAG[@sha256:<64 hex>] where TAG starts with an exact release, vMAJOR.MINOR.PATCH (a digest
# may be added: docs/compose.md, "Updating the images")
EXACT_IMAGE = re.compile(r"[\w./-]+:v?\d+\.\d+\.\d+(-[\w.-]+)?(@sha256:[0-9a-f]{64})?")
# PostgreSQL >= 10 numbers its releases MAJOR.MINOR: 16.6 is one exact release
EXACT_POSTGRES = re.compile(r"postgres:\d+\.\d+(-[\w.-]+)?(@sha256:[0-9a-f]{64})?")


def exact(image: str) -> bool:
    """Whether an image reference names one exact release."""
    return bool(EXACT_IMAGE.fullmatch(image) or EXACT_POSTGRES.fullmatch(image))


@pytest.mark.parametrize(
    ("image", "expected"),
    [
        ("prom/prometheus:v2.55.1", True),
        ("nvcr.io/nvidia/k8s/dcgm-exporter:3.3.9-3.6.1-ubuntu22.04", True),
        ("grafana/grafana:11.3.1@sha256:" + "a" * 64, True),
        ("grafana/grafana:11.3", False),
        ("postgres:16-bookworm", False),
        ("postgres:16.6-bookworm", True),
        ("infergauge:latest", False),
        ("infergauge", False),
    ],
)
def test_exact_image_pattern(image: str, expected: bool) -> None:
    assert exact(image) is expected


def test_images_are_pinned_to_exact_versions(resolved: dict) -> None:
    loose = {name: svc["image"] for name, svc in resolved["services"].items()}
    assert {name: i for name, i in loose.items() if not exact(i)} == {}
    dockerfile = (REPO / "Dockerfile").read_text()
    base = re.search(r"^ARG PYTHON_IMAGE=(\S+)$", dockerfile, re.M)
    assert base, "the Dockerfile names its base image once, in ARG PYTHON_IMAGE"
    assert re.fullmatch(r"python:3\.11\.\d+-slim-bookworm", base.group(1))


def test_host_ports_bind_loopback_only(resolved: dict) -> None:
    published = 0
    for name, svc in resolved["services"].items():
        for port in svc.get("ports", []):
            host_ip = port.get("host_ip") if isinstance(port, dict) else str(port).split(":")[0]
            assert host_ip == "127.0.0.1", f"{name} publishes {port} beyond loopback"
            published += 1
    assert published >= 7


def test_gpu_services_reserve_nvidia_gpus(resolved: dict) -> None:
    for name in ("exporter-gpu", "dcgm-exporter", "vllm", "sglang"):
        devices = resolved["services"][name]["deploy"]["resources"]["reservations"]["devices"]
        assert devices[0]["driver"] == "nvidia", name
        assert devices[0]["capabilities"] == ["gpu"], name


def started(config: dict, *profiles: str) -> dict[str, dict]:
    """The services `up` starts with these profiles (docker-compose 1.29's `config` prints them all)."""
    return {
        name: svc
        for name, svc in config["services"].items()
        if not svc.get("profiles") or set(svc["profiles"]) & set(profiles)
    }


def test_the_default_profile_reserves_no_device() -> None:
    # a laptop without the NVIDIA toolkit refuses a whole stack that reserves one device
    result = compose_config({}, "config")
    assert result.returncode == 0, result.stderr
    services = started(yaml.safe_load(result.stdout))
    assert set(services) == {"prometheus", "grafana", "exporter", "simengine"}
    assert {n: s["deploy"] for n, s in services.items() if "deploy" in s} == {}


def test_the_gpu_profile_swaps_in_the_gpu_exporter_under_the_same_name() -> None:
    assert compose_config({}, "--profile", "gpu", "config", "-q").returncode == 0
    result = compose_config({}, "--profile", "gpu", "config")
    assert result.returncode == 0, result.stderr
    services = started(yaml.safe_load(result.stdout), "gpu")
    assert [n for n, s in services.items() if "deploy" in s] == ["exporter-gpu"]
    gpu, plain = services["exporter-gpu"], services["exporter"]
    assert gpu["networks"]["default"]["aliases"] == ["exporter"]  # Prometheus' and loadgen's target
    for key in ("command", "pid", "ports", "environment", "image"):
        assert gpu[key] == plain[key], key
    assert "deploy" not in plain


def test_exporter_is_built_here_and_sees_host_processes(resolved: dict) -> None:
    exporter = resolved["services"]["exporter"]
    assert exporter["pid"] == "host"
    assert Path(exporter["build"]["context"]).resolve() == REPO
    dockerfile = (REPO / "Dockerfile").read_text()
    assert re.findall(r"^FROM \$\{PYTHON_IMAGE\}", dockerfile, re.M), "every stage on the pinned base"
    assert "infergauge-exporter" in dockerfile


def test_provisioning_and_rules_are_mounted(resolved: dict) -> None:
    def sources(service: str) -> dict[str, Path]:
        # docker-compose 1.29 prints short syntax: SOURCE:TARGET[:MODE]; named volumes have no "/" source
        mounts = [v.split(":") for v in resolved["services"][service]["volumes"]]
        return {m[1]: Path(m[0]) for m in mounts if m[0].startswith("/")}

    grafana = sources("grafana")
    assert grafana["/etc/grafana/provisioning"] == REPO / "grafana" / "provisioning"
    assert grafana["/var/lib/grafana/dashboards"] == REPO / "grafana" / "dashboards"
    prom = sources("prometheus")
    assert prom["/etc/prometheus/prometheus.yml"] == REPO / "prometheus" / "prometheus.yml"
    assert prom["/etc/prometheus/rules"] == REPO / "prometheus" / "rules"
    env = resolved["services"]["grafana"]["environment"]
    home = env["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert (REPO / "grafana" / "dashboards" / Path(home).name).is_file()
    assert env["GF_SECURITY_ADMIN_PASSWORD"] == "pw-for-test"


def test_prometheus_keeps_weeks_of_history(resolved: dict) -> None:
    command = resolved["services"]["prometheus"]["command"]
    retention = next(c for c in command if c.startswith("--storage.tsdb.retention.time="))
    assert retention.endswith("90d")


def test_engines_expose_metrics(resolved: dict) -> None:
    assert "--enable-metrics" in resolved["services"]["sglang"]["command"]
    assert resolved["services"]["loadgen"]["network_mode"] == "service:prometheus"


def image_user(dockerfile: str) -> str:
    """The uid the image runs as (its last USER line, `uid[:gid]`)."""
    users = re.findall(r"^USER (\S+)$", dockerfile, re.M)
    assert users, "the image names its user"
    return users[-1].split(":")[0]


def test_results_are_a_named_volume_the_images_user_owns(resolved: dict) -> None:
    loadgen = resolved["services"]["loadgen"]
    mounts = {v.split(":")[1]: v.split(":")[0] for v in loadgen["volumes"]}
    source = mounts["/work/results"]
    assert "/" not in source, f"{source} is a bind mount: its owner is the host's, not the image's user"
    assert resolved["volumes"][source]["name"] == "infergauge-results"
    dockerfile = (REPO / "Dockerfile").read_text()
    uid = image_user(dockerfile)
    assert uid.isdigit()
    assert int(uid) != 0
    assert "user" not in loadgen or str(loadgen["user"]).split(":")[0] == uid
    # Docker fills a new named volume from the image's mount point, owner included: the image
    # must create /work/results owned by that user
    assert re.search(rf"mkdir -p /work/results && chown -R {uid}(:\d+)? /work\b", dockerfile)


def _mounts(resolved: dict, service: str) -> dict[str, Path]:
    """Container path -> host path of the bind mounts of one service."""
    volumes = [v.split(":") for v in resolved["services"][service]["volumes"]]
    return {v[1]: Path(v[0]) for v in volumes if v[0].startswith("/")}


def _host_path(mounts: dict[str, Path], inside: str) -> Path:
    """Where a path inside the container comes from on the host (through its bind mounts)."""
    for target, source in sorted(mounts.items(), key=lambda m: -len(m[0])):
        if inside == target or inside.startswith(target.rstrip("/") + "/"):
            return source / Path(inside).relative_to(target)
    raise AssertionError(f"{inside} is not mounted from the repository")


def test_every_provisioned_grafana_path_exists(resolved: dict) -> None:
    mounts = _mounts(resolved, "grafana")
    provisioning = _host_path(mounts, "/etc/grafana/provisioning")
    providers = [
        p
        for f in sorted((provisioning / "dashboards").glob("*.yml"))
        for p in yaml.safe_load(f.read_text())["providers"]
    ]
    assert providers
    for provider in providers:
        folder = _host_path(mounts, provider["options"]["path"])
        assert sorted(folder.glob("*.json")), f"{provider['name']}: no dashboards in {folder}"
    env = resolved["services"]["grafana"]["environment"]
    sources = [
        d
        for f in sorted((provisioning / "datasources").glob("*.yml"))
        for d in yaml.safe_load(f.read_text())["datasources"]
    ]
    assert {d["type"] for d in sources} == {"prometheus", "grafana-postgresql-datasource"}
    for source in sources:
        for name in re.findall(r"\$\{(\w+)\}", json.dumps(source)):
            assert name in env, f"datasource {source['name']} reads ${{{name}}}, which grafana is not given"
    host = env["PROMETHEUS_URL"].split("//")[1].split(":")[0]
    assert host in resolved["services"]


def test_every_prometheus_rule_file_is_mounted(resolved: dict) -> None:
    mounts = _mounts(resolved, "prometheus")
    config = yaml.safe_load(_host_path(mounts, "/etc/prometheus/prometheus.yml").read_text())
    assert config["rule_files"]
    for pattern in config["rule_files"]:
        inside = pattern if pattern.startswith("/") else f"/etc/prometheus/{pattern}"
        found = list(_host_path(mounts, str(Path(inside).parent)).glob(Path(inside).name))
        assert found, f"rule_files {pattern!r} matches nothing mounted"


def test_servers_listen_on_all_interfaces_said_explicitly(resolved: dict) -> None:
    # defaults may move to loopback: inside a container that would hide the port from Prometheus
    services = resolved["services"]
    for name in ("exporter", "exporter-gpu"):
        command = services[name]["command"]
        assert command[command.index("--listen-address") + 1] == "0.0.0.0", name
    simengine = services["simengine"]["command"]
    assert simengine[simengine.index("--host") + 1] == "0.0.0.0"
    assert services["loadgen"]["environment"]["LOADGEN_METRICS_LISTEN_ADDRESS"] == "0.0.0.0"
