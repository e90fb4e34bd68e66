"""docker-compose.yml: valid for Debian's docker-compose 1.29, pinned images, loopback ports, GPUs."""

from __future__ import annotations

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
    profiles = [arg for p in ("dcgm", "vllm", "sglang", "loadgen", "baselines") for arg in ("--profile", p)]
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
        "dcgm-exporter": ["dcgm"],
        "vllm": ["vllm"],
        "sglang": ["sglang"],
        "loadgen": ["loadgen"],
        "postgres": ["baselines"],
    }
    assert set(resolved["services"]) == set(raw)


def test_images_are_pinned(resolved: dict) -> None:
    for name, svc in resolved["services"].items():
        image = svc["image"]
        tag = image.rsplit(":", 1)[1] if ":" in image.split("/")[-1] else ""
        assert tag not in ("", "latest"), f"{name}: {image} is not pinned"
        assert re.search(r"\d", tag), f"{name}: {image} has no version in its tag"


def test_host_ports_bind_loopback_only(resolved: dict) -> None:
    published = 0
    for name, svc in resolved["services"].items():
        for port in svc.get("ports", []):
            host_ip = port.get("host_ip") if isinstance(port, dict) else str(port).split(":")[0]
            assert host_ip == "127.0.0.1", f"{name} publishes {port} beyond loopback"
            published += 1
    assert published >= 7


def test_gpu_services_reserve_nvidia_gpus(resolved: dict) -> None:
    for name in ("exporter", "dcgm-exporter", "vllm", "sglang"):
        devices = resolved["services"][name]["deploy"]["resources"]["reservations"]["devices"]
        assert devices[0]["driver"] == "nvidia", name
        assert devices[0]["capabilities"] == ["gpu"], name


def test_exporter_is_built_here_and_sees_host_processes(resolved: dict) -> None:
    exporter = resolved["services"]["exporter"]
    assert exporter["pid"] == "host"
    assert Path(exporter["build"]["context"]).resolve() == REPO
    dockerfile = (REPO / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.11[\w.-]*$", dockerfile, re.M)
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
