"""Builders for SQL (PostgreSQL datasource) panels, variables and annotations: the results store's
queries. Every SQL reference goes through the `store` datasource variable, whose default is the
provisioned datasource (grafana/provisioning/datasources/postgres.yml)."""

from __future__ import annotations

from .panels import Json, datasource_picker

POSTGRES_TYPE = "grafana-postgresql-datasource"
POSTGRES_UID = "infergauge-postgres"  # the provisioned datasource: the variable's default
POSTGRES_VAR = "store"
SQL_DS: dict[str, str] = {"type": POSTGRES_TYPE, "uid": f"${{{POSTGRES_VAR}}}"}


def store_var() -> Json:
    """The PostgreSQL datasource picker (the results store), defaulting to the provisioned uid."""
    return datasource_picker(POSTGRES_VAR, "Results store", POSTGRES_TYPE, POSTGRES_UID)


def sql_target(sql: str, *, ref: str = "A", fmt: str = "time_series") -> Json:
    """One raw SQL query of a panel; `fmt` is "time_series" (a `time` column) or "table"."""
    return {
        "datasource": SQL_DS,
        "refId": ref,
        "editorMode": "code",
        "format": fmt,
        "rawQuery": True,
        "rawSql": sql,
    }


def sql_var(name: str, label: str, sql: str) -> Json:
    """A multi-value variable with "All" filled by a SQL query (one column of values); "All" sends
    every value, quoted, so `col IN ($name)` works for any selection."""
    return {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": SQL_DS,
        "query": sql,
        "definition": sql,
        "refresh": 2,
        "sort": 1,
        "multi": True,
        "includeAll": True,
        "allValue": None,
        "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
        "options": [],
        "hide": 0,
        "regex": "",
    }


def sql_annotation(name: str, sql: str, color: str) -> Json:
    """Annotations from a SQL query returning `time`, `text` and `tags` (comma-separated) columns."""
    return {
        "name": name,
        "datasource": SQL_DS,
        "enable": True,
        "hide": False,
        "iconColor": color,
        "rawQuery": sql,
        "target": sql_target(sql, ref="Anno", fmt="table"),
    }


def on_store(panel: Json) -> Json:
    """A panel whose queries are SQL: its datasource is the store's."""
    return {**panel, "datasource": SQL_DS}
