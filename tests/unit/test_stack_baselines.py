"""The results store in the stack: compose's postgres service and Grafana's PostgreSQL datasource."""

from __future__ import annotations

from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]


def test_postgres_service_is_pinned_loopback_and_keeps_no_password() -> None:
    service = yaml.safe_load((REPO / "docker-compose.yml").read_text())["services"]["postgres"]
    assert service["image"].split(":")[1][0].isdigit()
    assert service["ports"] == ["127.0.0.1:5432:5432"]
    assert service["environment"]["POSTGRES_PASSWORD"] == "${INFERGAUGE_DB_PASSWORD:-}"
    assert service["volumes"] == ["postgres-data:/var/lib/postgresql/data"]


def test_the_postgres_datasource_has_a_fixed_uid_and_its_password_from_the_environment() -> None:
    text = (REPO / "grafana" / "provisioning" / "datasources" / "postgres.yml").read_text()
    (source,) = yaml.safe_load(text)["datasources"]
    assert (source["uid"], source["type"]) == ("infergauge-postgres", "grafana-postgresql-datasource")
    assert source["secureJsonData"] == {"password": "${INFERGAUGE_DB_PASSWORD}"}
    assert source["jsonData"]["database"] == "infergauge"
