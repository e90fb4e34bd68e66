"""deploy/systemd and deploy/ci: one baseline pass each, shipped as files and checked by their validators
(systemd-analyze verify; the workflow as YAML with the keys a GitHub runner needs)."""

from __future__ import annotations

import configparser
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
SYSTEMD = REPO / "deploy" / "systemd"
SERVICE = SYSTEMD / "infergauge-baseline.service"
TIMER = SYSTEMD / "infergauge-baseline.timer"
WORKFLOW = REPO / "deploy" / "ci" / "github-actions-baseline.yml"
INSTALL_PREFIX = "/opt/infergauge/.venv"  # where the unit expects loadgen's virtual environment
SYSTEMD_ANALYZE = shutil.which("systemd-analyze")
PINNED_ACTION = re.compile(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}")


def unit(path: Path) -> configparser.ConfigParser:
    """A unit file as sections of keys (systemd's syntax is INI-like; repeated keys are not used here)."""
    parser = configparser.ConfigParser(interpolation=None, strict=True)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(path.read_text())
    return parser


def verify(tmp_path: Path, prefix: str) -> subprocess.CompletedProcess[str]:
    """`systemd-analyze verify` on copies of both units with loadgen's install prefix set to `prefix`."""
    assert SYSTEMD_ANALYZE, "systemd-analyze is not installed (Debian package systemd)"
    for source in (SERVICE, TIMER):
        (tmp_path / source.name).write_text(source.read_text().replace(INSTALL_PREFIX, prefix))
    return subprocess.run(
        [SYSTEMD_ANALYZE, "verify", SERVICE.name, TIMER.name],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_systemd_units_verify(tmp_path: Path) -> None:
    # verify checks ExecStart's program exists: point the prefix at this test's own environment
    result = verify(tmp_path, sys.prefix)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stderr.strip() == "", result.stderr


def test_systemd_verify_fails_without_loadgen(tmp_path: Path) -> None:
    result = verify(tmp_path, str(tmp_path / "no-such-venv"))
    assert result.returncode != 0
    assert "no-such-venv/bin/loadgen" in result.stderr


def test_service_runs_one_baseline_pass() -> None:
    service = unit(SERVICE)["Service"]
    assert service["Type"] == "oneshot", "an active oneshot unit is not started twice: passes never overlap"
    argv = shlex.split(service["ExecStart"])
    assert argv[0] == f"{INSTALL_PREFIX}/bin/loadgen"
    assert argv[1:4] == ["baseline", "run", "/etc/infergauge/suite.yaml"]
    assert service["EnvironmentFile"].lstrip("-").startswith("/etc/infergauge/")
    assert "LOADGEN_STORE" not in service.get("Environment", ""), "secrets go in the EnvironmentFile"
    assert service["NoNewPrivileges"] == "yes"
    assert service["DynamicUser"] == "yes"


def test_timer_starts_the_service_nightly() -> None:
    timer = unit(TIMER)
    assert timer["Timer"]["Unit"] == SERVICE.name
    assert timer["Timer"]["OnCalendar"]
    assert timer["Timer"]["Persistent"] == "true"
    assert timer["Install"]["WantedBy"] == "timers.target"


@pytest.fixture(scope="module")
def workflow() -> dict[Any, Any]:
    """The GitHub Actions workflow (YAML 1.1 reads the `on:` key as True)."""
    return yaml.safe_load(WORKFLOW.read_text())


def test_workflow_has_what_a_runner_needs(workflow: dict[Any, Any]) -> None:
    triggers = workflow.get("on", workflow.get(True))
    assert {"workflow_dispatch", "schedule"} <= set(triggers)
    assert triggers["schedule"][0]["cron"].count(" ") == 4
    (job,) = workflow["jobs"].values()
    assert job["runs-on"]
    assert job["steps"]
    for step in job["steps"]:
        assert ("uses" in step) != ("run" in step), step
        if "uses" in step:
            assert PINNED_ACTION.fullmatch(step["uses"]), f"{step['uses']}: pin actions to a commit"
    assert workflow["concurrency"]["cancel-in-progress"] is False


def test_workflow_gates_on_the_baseline_exit_status(workflow: dict[Any, Any]) -> None:
    (job,) = workflow["jobs"].values()
    runs = [s for s in job["steps"] if "loadgen baseline run" in s.get("run", "")]
    assert len(runs) == 1
    (gate,) = runs
    assert "continue-on-error" not in gate, "the exit status is the gate"
    assert "continue-on-error" not in job, "the exit status is the gate"
    assert "|| true" not in gate["run"]
    suite = job["env"]["SUITE"]
    assert (REPO / suite).is_file(), suite
    assert job["env"]["LOADGEN_STORE"].startswith("${{ secrets."), "the store URL comes from a secret"


def store_check(workflow: dict[Any, Any]) -> str:
    """The script of the workflow's first step, which refuses a pass without a persistent store."""
    (job,) = workflow["jobs"].values()
    first = job["steps"][0]
    assert "LOADGEN_STORE" in first["run"], "the store is checked before anything else"
    return str(first["run"])


@pytest.mark.parametrize(
    ("store", "refused"),
    [
        (None, "no results store: set the repository secret INFERGAUGE_STORE_URL"),
        ("", "no results store: set the repository secret INFERGAUGE_STORE_URL"),
        ("sqlite:///results/infergauge.db", "is not a postgresql:// URL"),
        ("none", "is not a postgresql:// URL"),
        ("postgresql://infergauge@db.example.com/infergauge", None),
    ],
)
def test_workflow_fails_in_one_line_without_a_persistent_store(
    workflow: dict[Any, Any], store: str | None, refused: str | None
) -> None:
    env = {"PATH": "/usr/bin:/bin"} | ({} if store is None else {"LOADGEN_STORE": store})
    # GitHub runs a step's `run` with `bash -e {0}`
    result = subprocess.run(
        ["bash", "-e", "-c", store_check(workflow)], env=env, capture_output=True, text=True, check=False
    )
    if refused is None:
        assert result.returncode == 0, result.stdout + result.stderr
        assert "PostgreSQL" in result.stdout
        return
    assert result.returncode == 1
    (line,) = result.stdout.splitlines()
    assert line.startswith("::error::")
    assert refused in line
    assert "docs/ci.md" in line


def test_workflow_store_and_its_password_come_from_secrets(workflow: dict[Any, Any]) -> None:
    (job,) = workflow["jobs"].values()
    assert job["env"]["LOADGEN_STORE"] == "${{ secrets.INFERGAUGE_STORE_URL }}"
    assert job["env"]["PGPASSWORD"] == "${{ secrets.INFERGAUGE_STORE_PASSWORD }}"


def calendar(expression: str) -> str:
    """`systemd-analyze calendar`'s normalized form of an OnCalendar expression."""
    assert SYSTEMD_ANALYZE, "systemd-analyze is not installed (Debian package systemd)"
    out = subprocess.run(
        [SYSTEMD_ANALYZE, "calendar", expression], capture_output=True, text=True, timeout=30, check=True
    ).stdout
    return next(line.split(":", 1)[1].strip() for line in out.splitlines() if "Normalized form" in line)


def test_the_timer_fires_at_02_utc_whatever_the_hosts_zone() -> None:
    on_calendar = unit(TIMER)["Timer"]["OnCalendar"]
    assert calendar(on_calendar) == "*-*-* 02:00:00 UTC"
    assert calendar("*-*-* 02:00:00") != "*-*-* 02:00:00 UTC"  # without the zone: the host's time


def test_every_schedule_is_02_utc_and_says_so(workflow: dict[Any, Any]) -> None:
    triggers = workflow.get("on", workflow.get(True))
    assert [s["cron"] for s in triggers["schedule"]] == ["0 2 * * *"]
    cron_lines = [line for line in WORKFLOW.read_text().splitlines() if "cron:" in line]
    assert all("UTC" in line for line in cron_lines), cron_lines
    cronjob = yaml.safe_load((REPO / "deploy" / "kubernetes" / "base" / "baseline-cronjob.yaml").read_text())
    assert (cronjob["spec"]["schedule"], cronjob["spec"]["timeZone"]) == ("0 2 * * *", "Etc/UTC")
    assert "UTC" in TIMER.read_text().split("[Timer]")[0], "the timer's comment says UTC"
