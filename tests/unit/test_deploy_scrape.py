"""deploy/kubernetes scraping: the ServiceMonitor / PodMonitor and the plain overlay's annotations and
scrape job reach the exporter and loadgen pods under the job names the rules select, and only
Prometheus and loadgen may reach the exporters."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.unit.test_deploy_workloads import COMPOSE_JOBS, KUBE, exporter_daemonset, get, pod

PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"


def test_service_monitor_scrapes_the_exporter_as_the_rules_expect() -> None:
    monitor = get("prometheus-operator", "ServiceMonitor", "infergauge-exporter")
    service = get("prometheus-operator", "Service", "infergauge-exporter")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert {e["port"] for e in monitor["spec"]["endpoints"]} <= {p["name"] for p in service["spec"]["ports"]}
    assert "jobLabel" not in monitor["spec"]  # so the Operator names the job after the Service
    assert service["metadata"]["name"] in COMPOSE_JOBS
    pods = pod(exporter_daemonset())["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pods.items()


LOADGEN_PODS = [
    ("prometheus-operator", "CronJob", "infergauge-baseline"),
    ("loadgen-shards", "Job", "loadgen-shards"),
]


@pytest.mark.parametrize(("overlay", "kind", "name"), LOADGEN_PODS)
def test_pod_monitor_scrapes_loadgen_pods_as_job_loadgen(overlay: str, kind: str, name: str) -> None:
    monitor = get("prometheus-operator", "PodMonitor", "loadgen")["spec"]
    template = pod(get(overlay, kind, name))
    labels = template["metadata"]["labels"]
    assert monitor["selector"]["matchLabels"].items() <= labels.items()
    assert labels[monitor["jobLabel"]] in COMPOSE_JOBS
    ports = {p["name"] for c in template["spec"]["containers"] for p in c.get("ports", [])}
    assert {e["port"] for e in monitor["podMetricsEndpoints"]} <= ports


def test_plain_overlay_annotates_the_metrics_ports() -> None:
    for kind, name in (("DaemonSet", "infergauge-exporter"), ("CronJob", "infergauge-baseline")):
        template = pod(get("plain", kind, name))
        notes = template["metadata"]["annotations"]
        assert notes["prometheus.io/scrape"] == "true"
        ports = {p["containerPort"] for c in template["spec"]["containers"] for p in c.get("ports", [])}
        assert int(notes["prometheus.io/port"]) in ports, (kind, notes)
        assert template["metadata"]["labels"]["app.kubernetes.io/name"] in COMPOSE_JOBS


def test_plain_scrape_config_passes_promtool(tmp_path: Path) -> None:
    # Debian's Prometheus is built without Kubernetes service discovery: promtool checks everything
    # else (relabel rules, regexes, intervals) with the discovery swapped for a static target.
    config = yaml.safe_load((KUBE / "overlays" / "plain" / "prometheus-scrape.yml").read_text())
    (job,) = config["scrape_configs"]
    assert job.pop("kubernetes_sd_configs")[0]["role"] == "pod"
    job["static_configs"] = [{"targets": ["127.0.0.1:9402"]}]
    assert any(r.get("target_label") == "job" for r in job["relabel_configs"])
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    out = subprocess.run(
        [PROMTOOL, "check", "config", "prometheus.yml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_network_policy_lets_only_prometheus_and_loadgen_reach_the_exporters() -> None:
    policy = get("prometheus-operator", "NetworkPolicy", "infergauge-exporter")["spec"]
    template = pod(exporter_daemonset())
    assert policy["podSelector"]["matchLabels"].items() <= template["metadata"]["labels"].items()
    assert policy["policyTypes"] == ["Ingress"]
    (rule,) = policy["ingress"]
    ports = {p["name"] for c in template["spec"]["containers"] for p in c["ports"]}
    assert {p["port"] for p in rule["ports"]} <= ports
    peers = [peer["podSelector"]["matchLabels"] for peer in rule["from"]]
    assert {"app.kubernetes.io/name": "prometheus"} in peers
    for overlay, kind, name in LOADGEN_PODS:
        labels = pod(get(overlay, kind, name))["metadata"]["labels"]
        assert any(peer.items() <= labels.items() for peer in peers), f"{name} could not read /manifest"
