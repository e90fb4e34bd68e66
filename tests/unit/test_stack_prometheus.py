"""Prometheus config and rules: promtool check config / check rules / test rules, and rule coverage."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
PROM = REPO / "prometheus"
CONFIGS = ("prometheus.yml", "prometheus.local.yml")
RULE_FILES = sorted((PROM / "rules").glob("*.yml"))
RULE_TESTS = sorted((PROM / "tests").glob("*.yml"))
PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"

pytestmark = pytest.mark.prometheus


def promtool(*args: str, cwd: Path = PROM) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PROMTOOL, *args], cwd=cwd, capture_output=True, text=True, timeout=60, check=False)


def load(path: Path) -> dict:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", CONFIGS)
def test_promtool_check_config(name: str) -> None:
    result = promtool("check", "config", name)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_local_config_loads_the_shipped_rules() -> None:
    # promtool resolves rule_files relative to the config: the local config must find every rule file
    result = promtool("check", "config", "prometheus.local.yml")
    for rule_file in RULE_FILES:
        assert f"rules/{rule_file.name}" in result.stdout


def test_promtool_check_rules() -> None:
    assert len(RULE_FILES) >= 2
    result = promtool("check", "rules", *(str(p) for p in RULE_FILES))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("SUCCESS") == len(RULE_FILES)


@pytest.mark.parametrize("test_file", [p.name for p in RULE_TESTS])
def test_promtool_test_rules(test_file: str) -> None:
    result = promtool("test", "rules", f"tests/{test_file}")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_every_rule_has_a_promtool_test() -> None:
    tested: set[str] = set()
    for path in RULE_TESTS:
        for case in load(path)["tests"]:
            tested.update(t["alertname"] for t in case.get("alert_rule_test", []))
            for t in case.get("promql_expr_test", []):
                tested.add(t["expr"].split("{")[0].strip())
    rules = [r for path in RULE_FILES for g in load(path)["groups"] for r in g["rules"]]
    # one engine-neutral record per engine (rules/engines.yml), told apart by its `engine` label
    keys = {(r.get("record") or r.get("alert"), (r.get("labels") or {}).get("engine")) for r in rules}
    assert len(keys) == len(rules), "rule names must be unique (per engine for the engine rules)"
    assert {name for name, _ in keys} - tested == set()


def test_every_alert_explains_itself() -> None:
    for path in RULE_FILES:
        for group in load(path)["groups"]:
            for rule in group["rules"]:
                if "alert" in rule:
                    assert rule["labels"]["severity"] in ("warning", "critical"), rule["alert"]
                    assert rule["annotations"]["summary"], rule["alert"]
                    assert rule["annotations"]["description"], rule["alert"]


def _jobs(config: dict) -> dict[str, dict]:
    return {job["job_name"]: job for job in config["scrape_configs"]}


def test_compose_and_local_configs_agree() -> None:
    compose, local = (load(PROM / name) for name in CONFIGS)
    assert compose["global"] == local["global"]
    assert compose["global"]["scrape_interval"] == "5s"  # benchmark resolution; tests shorten their own copy
    assert set(_jobs(compose)) == set(_jobs(local))
    assert [Path(p).name for p in compose["rule_files"]] == [Path(p).name for p in local["rule_files"]]


def test_jobs_cover_every_part_on_its_default_port() -> None:
    jobs = _jobs(load(PROM / "prometheus.local.yml"))
    ports = {
        name: {t.rsplit(":", 1)[1] for sc in job["static_configs"] for t in sc["targets"]}
        for name, job in jobs.items()
    }
    assert ports["loadgen"] == {"9403"}
    assert ports["infergauge-exporter"] == {"9402"}
    assert ports["vllm"] == {"8000"}
    assert ports["sglang"] == {"30000"}
    assert ports["dcgm-exporter"] == {"9400"}
    assert "simengine" in ports
    for job in jobs.values():
        for sc in job["static_configs"]:
            assert all(t.startswith("127.0.0.1:") for t in sc["targets"])


def test_remote_write_example_is_commented_out() -> None:
    text = (PROM / "prometheus.yml").read_text(encoding="utf-8")
    assert "# remote_write:" in text
    assert "remote_write" not in load(PROM / "prometheus.yml")


@pytest.mark.parametrize("name", CONFIGS)
def test_files_the_config_comments_name_exist(name: str) -> None:
    # prometheus.local.yml used to point at a DESIGN.md that is not in the repository
    comments = [line.split("#", 1)[1] for line in (PROM / name).read_text().splitlines() if "#" in line]
    named = {m for c in comments for m in re.findall(r"[\w./-]+\.(?:md|py|yml)\b", c)}
    named -= {"prometheus.yml"}  # the config's own name as mounted in the container
    missing = [f for f in named if not (REPO / f).exists() and not (PROM / f).exists()]
    assert missing == []
    assert all("DESIGN.md" not in c for c in comments)
