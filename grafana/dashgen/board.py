"""Dashboard-level builders: template variables, run-boundary annotations, layout, the dashboard."""

from __future__ import annotations

from .panels import DATASOURCE_UID, DATASOURCE_VAR, DS, GRAFANA_DS, SCHEMA_VERSION, Json, datasource_picker

# SLO thresholds (seconds) the dashboards draw and judge by until a user types others (or passes
# var-ttft_slo=0.2 in the URL): defaults only, not the run's own --slo.
SLO_DEFAULTS = (
    ("ttft_slo", "TTFT SLO (s)", "0.5"),
    ("tpot_slo", "TPOT SLO (s)", "0.05"),
    ("e2e_slo", "E2E SLO (s)", "10"),
)


def datasource_var() -> Json:
    """The Prometheus datasource picker; its default is the provisioned uid, so provisioning needs no
    edit, and a Grafana without that uid falls back to its default Prometheus."""
    return datasource_picker(DATASOURCE_VAR, "Prometheus", "prometheus", DATASOURCE_UID)


def slo_vars() -> list[Json]:
    """The TTFT, TPOT and E2E SLO threshold boxes."""
    return [textbox_var(name, label, default) for name, label, default in SLO_DEFAULTS]


def query_var(
    name: str, label: str, query: str, *, multi: bool = False, include_all: bool = False, sort: int = 1
) -> Json:
    """A template variable filled by `label_values(...)`, refreshed on time-range change."""
    return {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": DS,
        "query": query,  # a plain string: what Grafana runs for grafonnet-style provisioned dashboards
        "definition": query,
        "refresh": 2,
        "sort": sort,
        "multi": multi,
        "includeAll": include_all,
        "allValue": ".*" if include_all else None,
        "current": {},
        "options": [],
        "hide": 0,
        "regex": "",
    }


def multi_var(name: str, label: str, query: str, *, sort: int = 1) -> Json:
    """A query variable that allows several values and "All" (matched with `=~`)."""
    return query_var(name, label, query, multi=True, include_all=True, sort=sort)


def textbox_var(name: str, label: str, default: str) -> Json:
    """A free-text variable (SLO thresholds in seconds)."""
    return {
        "name": name,
        "label": label,
        "type": "textbox",
        "query": default,
        "hide": 0,
        "current": {"text": default, "value": default},
        "options": [{"selected": True, "text": default, "value": default}],
    }


def _layout(panels: list[Json]) -> list[Json]:
    """Give panels ids and gridPos, left to right, wrapping at Grafana's 24 columns."""
    out: list[Json] = []
    x = y = row_h = 0
    for pid, panel in enumerate(panels, start=1):
        w, h = panel.pop("_size")
        if x + w > 24 or panel["type"] == "row":
            x, y, row_h = 0, y + row_h, 0
        panel = {"id": pid, "gridPos": {"x": x, "y": y, "w": w, "h": h}, **panel}
        out.append(panel)
        x += w
        row_h = max(row_h, h)
        if panel["type"] == "row":
            x, y, row_h = 0, y + h, 0
    return out


def dashboard(
    uid: str,
    title: str,
    panels: list[Json],
    *,
    desc: str,
    variables: list[Json],
    annotations: list[Json] | None = None,
    time_from: str = "now-1h",
    refresh: str = "10s",
    tags: tuple[str, ...] = (),
) -> Json:
    """A complete dashboard ready for file provisioning (stable uid, no __inputs)."""
    builtin = {
        "builtIn": 1,
        "datasource": GRAFANA_DS,
        "enable": True,
        "hide": True,
        "iconColor": "rgba(0, 211, 255, 1)",
        "name": "Annotations & Alerts",
        "type": "dashboard",
    }
    return {
        "uid": uid,
        "title": title,
        "description": desc,
        "tags": ["infergauge", *tags],
        "timezone": "utc",
        "editable": True,
        "graphTooltip": 1,
        "schemaVersion": SCHEMA_VERSION,
        "version": 1,
        "refresh": refresh,
        "time": {"from": time_from, "to": "now"},
        "timepicker": {},
        "fiscalYearStartMonth": 0,
        "liveNow": False,
        "weekStart": "",
        "links": [
            {
                "type": "dashboards",
                "tags": ["infergauge"],
                "asDropdown": True,
                "title": "infergauge",
                "includeVars": False,
                "keepTime": True,
                "icon": "external link",
                "targetBlank": False,
                "tooltip": "",
                "url": "",
            }
        ],
        "annotations": {"list": [builtin, *(annotations or [])]},
        "templating": {"list": [datasource_var(), *variables]},
        "panels": _layout(panels),
    }


def run_boundary_annotations(run_filter: str) -> list[Json]:
    """Run start/end markers from Prometheus alone, plus the ones loadgen posts to Grafana's API.

    A run may be several shards (`--shard i/N` processes or hosts) sharing one run_id, each its own
    series: the run starts at the earliest shard start and ends only once every shard has ended
    (each shard's end gauge is 0 while it runs), at the latest end. A shard whose series is gone
    (stale: its process exited) no longer holds the end back."""

    def prom(name: str, expr: str, color: str, word: str) -> Json:
        return {
            "name": name,
            "datasource": DS,
            "enable": True,
            "hide": False,
            "iconColor": color,
            "expr": expr,
            "step": "5s",
            "useValueForTime": True,
            "titleFormat": f"run {{{{run_id}}}} {word}",
            "textFormat": "target {{target}}, scenario {{scenario}}",
            "tagKeys": "run_id,target,scenario",
        }

    by = "by (run_id, target, scenario)"
    start = f"loadgen_run_start_timestamp_seconds{{{run_filter}}}"
    end = f"loadgen_run_end_timestamp_seconds{{{run_filter}}}"
    start_expr = f"min {by} ({start} > 0) * 1000"
    end_expr = f"(max {by} ({end}) and min {by} ({end}) > 0) * 1000"
    api = {
        "name": "loadgen annotations (Grafana API)",
        "datasource": GRAFANA_DS,
        "enable": True,
        "hide": False,
        "iconColor": "purple",
        "target": {"type": "tags", "tags": ["infergauge"], "matchAny": True, "limit": 100},
    }
    return [
        prom("Run start (Prometheus)", start_expr, "green", "start"),
        prom("Run end (Prometheus)", end_expr, "red", "end"),
        api,
    ]
