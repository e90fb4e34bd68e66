"""overlays/plain/prometheus-scrape.yml in a real Prometheus: the built pods' labels and annotations
become job="infergauge-exporter" / job="loadgen" targets on their metrics ports; unannotated pods drop.

Debian's Prometheus has no Kubernetes discovery, so each pod is a static target carrying the
`__meta_kubernetes_pod_*` labels that discovery would give it (from the built manifests), and the
shipped relabel rules run unchanged on them."""

from __future__ import annotations

import re
import urllib.parse
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.integration.test_stack_support import free_port, prom_get, start_prometheus, wait_for
from tests.unit.test_deploy_workloads import COMPOSE_JOBS, KUBE, get, pod

pytestmark = [pytest.mark.prometheus, pytest.mark.xdist_group("prometheus"), pytest.mark.timeout(60)]
PODS = [  # (overlay, kind, name, the job it must be scraped as; None: not scraped)
    ("plain", "DaemonSet", "infergauge-exporter", "infergauge-exporter"),
    ("plain", "CronJob", "infergauge-baseline", "loadgen"),
    ("loadgen-shards", "Job", "loadgen-shards", "loadgen"),
    ("loadgen-shards", "Job", "loadgen-merge", None),
]


def meta(key: str) -> str:
    """A label or annotation key as Kubernetes discovery names it (`app.kubernetes.io/name` -> ...)."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", key)


def discovered(index: int, template: dict[str, Any]) -> dict[str, Any]:
    """The static target Kubernetes pod discovery would produce for this pod template."""
    ports = [p["containerPort"] for c in template["spec"]["containers"] for p in c.get("ports", [])]
    labels = {f"__meta_kubernetes_pod_label_{meta(k)}": v for k, v in template["metadata"]["labels"].items()}
    notes = template["metadata"].get("annotations", {})
    labels |= {f"__meta_kubernetes_pod_annotation_{meta(k)}": v for k, v in notes.items()}
    labels |= {
        "__meta_kubernetes_pod_phase": "Running",
        "__meta_kubernetes_pod_node_name": "gpu-node-1",
        "__meta_kubernetes_pod_name": f"pod-{index}",
    }
    address = f"10.0.0.{index}" + (f":{ports[0]}" if ports else ":80")
    return {"targets": [address], "labels": labels}


def test_plain_scrape_config_names_the_jobs_the_rules_select(tmp_path: Path) -> None:
    config = yaml.safe_load((KUBE / "overlays" / "plain" / "prometheus-scrape.yml").read_text())
    (job,) = config["scrape_configs"]
    job.pop("kubernetes_sd_configs")
    templates = [pod(get(overlay, kind, name)) for overlay, kind, name, _ in PODS]
    job["static_configs"] = [discovered(i + 1, t) for i, t in enumerate(templates)]
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
    port = free_port()
    proc = start_prometheus(tmp_path / "prometheus.yml", port, tmp_path / "data")
    try:
        url = f"http://127.0.0.1:{port}"
        want = sum(1 for *_, expected in PODS if expected)
        targets = wait_for(
            lambda: (t := prom_get(url, "targets")["activeTargets"]) and len(t) == want and t, 20
        )
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    by_pod = {t["labels"]["pod"]: t for t in targets}
    for i, ((*_, name, expected), template) in enumerate(zip(PODS, templates, strict=True), start=1):
        if expected is None:
            assert f"pod-{i}" not in by_pod, f"{name} has no scrape annotation and must not be scraped"
            continue
        target = by_pod[f"pod-{i}"]
        assert target["labels"]["job"] == expected, name
        assert expected in COMPOSE_JOBS
        scrape = urllib.parse.urlsplit(target["scrapeUrl"])
        assert scrape.port == int(template["metadata"]["annotations"]["prometheus.io/port"]), name
        assert scrape.path == "/metrics"
        assert target["labels"]["node"] == "gpu-node-1"
