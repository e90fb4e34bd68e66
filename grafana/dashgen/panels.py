"""Small builders for Grafana dashboard JSON (schemaVersion 39, Grafana 10/11 file provisioning).

Dashboards are written as Python so every panel shares one datasource reference, one layout rule and
one unit vocabulary; `python -m grafana.dashgen` writes grafana/dashboards/*.json, and a unit test
fails when the committed JSON differs from what this code generates.
"""

from __future__ import annotations

from typing import Any

DATASOURCE_UID = "infergauge-prometheus"  # the provisioned datasource: the variable's default
DATASOURCE_VAR = "datasource"
DS: dict[str, str] = {"type": "prometheus", "uid": f"${{{DATASOURCE_VAR}}}"}
GRAFANA_DS: dict[str, str] = {"type": "grafana", "uid": "-- Grafana --"}
SCHEMA_VERSION = 39

Json = dict[str, Any]


def target(expr: str, legend: str = "", *, ref: str = "A", instant: bool = False, fmt: str = "") -> Json:
    """One PromQL query of a panel; `fmt` is "table" or "heatmap" where the panel needs it."""
    out: Json = {"datasource": DS, "refId": ref, "expr": expr, "legendFormat": legend or "__auto"}
    if instant:
        out.update(instant=True, range=False)
    else:
        out.update(instant=False, range=True)
    if fmt:
        out["format"] = fmt
    return out


def targets(*pairs: tuple[str, str], instant: bool = False, fmt: str = "") -> list[Json]:
    """Several (expr, legend) queries with refIds A, B, C..."""
    return [
        target(expr, legend, ref=chr(ord("A") + i), instant=instant, fmt=fmt)
        for i, (expr, legend) in enumerate(pairs)
    ]


def _field_config(
    unit: str, *, thresholds: list[tuple[float | None, str]] | None = None, **custom: Any
) -> Json:
    steps = [{"color": color, "value": value} for value, color in (thresholds or [(None, "green")])]
    defaults: Json = {"unit": unit, "thresholds": {"mode": "absolute", "steps": steps}, "custom": custom}
    if thresholds:
        defaults["color"] = {"mode": "thresholds"}
    return {"defaults": defaults, "overrides": []}


def slo_override(series_name: str = "SLO") -> Json:
    """Draw the series named `series_name` as a dashed red line (the SLO the run was given)."""
    return {
        "matcher": {"id": "byName", "options": series_name},
        "properties": [
            {"id": "color", "value": {"mode": "fixed", "fixedColor": "red"}},
            {"id": "custom.lineStyle", "value": {"fill": "dash", "dash": [10, 10]}},
            {"id": "custom.fillOpacity", "value": 0},
        ],
    }


def _panel(
    kind: str,
    title: str,
    desc: str,
    tgts: list[Json],
    field_config: Json,
    options: Json,
    size: tuple[int, int],
    transformations: list[Json] | None = None,
) -> Json:
    """The keys every query panel has, in Grafana's order (`transformations` only where given)."""
    panel: Json = {
        "type": kind,
        "title": title,
        "description": desc,
        "datasource": DS,
        "targets": tgts,
        "fieldConfig": field_config,
        "options": options,
    }
    if transformations is not None:
        panel["transformations"] = transformations
    panel["_size"] = size
    return panel


def _list_legend() -> Json:
    """A plain list legend and a single-series tooltip (bar and XY charts)."""
    return {
        "legend": {"showLegend": True, "displayMode": "list", "placement": "bottom", "calcs": []},
        "tooltip": {"mode": "single", "sort": "none"},
    }


def timeseries(
    title: str,
    tgts: list[Json],
    unit: str,
    *,
    desc: str = "",
    w: int = 12,
    h: int = 8,
    stack: bool = False,
    slo_series: bool = False,
) -> Json:
    """A time series panel; `slo_series` styles a query with legend "SLO" as the SLO line."""
    fc = _field_config(
        unit,
        drawStyle="line",
        lineWidth=1,
        fillOpacity=10 if stack else 0,
        showPoints="never",
        spanNulls=False,
        stacking={"mode": "normal" if stack else "none", "group": "A"},
    )
    if slo_series:
        fc["overrides"].append(slo_override())
    options = {
        "legend": {
            "showLegend": True,
            "displayMode": "table",
            "placement": "bottom",
            "calcs": ["lastNotNull", "max"],
        },
        "tooltip": {"mode": "multi", "sort": "desc"},
    }
    return _panel("timeseries", title, desc, tgts, fc, options, (w, h))


def stat(
    title: str,
    tgts: list[Json],
    unit: str,
    *,
    desc: str = "",
    w: int = 4,
    h: int = 4,
    thresholds: list[tuple[float | None, str]] | None = None,
) -> Json:
    """A single-number panel (last value)."""
    options = {
        "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
        "colorMode": "value",
        "graphMode": "area",
        "textMode": "auto",
        "justifyMode": "auto",
        "orientation": "auto",
    }
    return _panel("stat", title, desc, tgts, _field_config(unit, thresholds=thresholds), options, (w, h))


def heatmap(title: str, expr: str, unit: str, *, desc: str = "", w: int = 12, h: int = 8) -> Json:
    """Histogram buckets over time (`expr` must keep the `le` label)."""
    fc: Json = {
        "defaults": {"custom": {"hideFrom": {"legend": False, "tooltip": False, "viz": False}}},
        "overrides": [],
    }
    options: Json = {
        "calculate": False,
        "cellGap": 1,
        "color": {
            "mode": "scheme",
            "scheme": "Oranges",
            "scale": "exponential",
            "exponent": 0.5,
            "steps": 64,
        },
        "yAxis": {"axisPlacement": "left", "unit": unit},
        "rowsFrame": {"layout": "auto"},
        "tooltip": {"mode": "single", "yHistogram": True, "showColorScale": False},
        "legend": {"show": True},
        "exemplars": {"color": "rgba(255,0,255,0.7)"},
    }
    return _panel("heatmap", title, desc, [target(expr, "{{le}}", fmt="heatmap")], fc, options, (w, h))


def table(
    title: str,
    tgts: list[Json],
    *,
    desc: str = "",
    w: int = 24,
    h: int = 10,
    transformations: list[Json] | None = None,
    overrides: list[Json] | None = None,
    unit: str = "short",
) -> Json:
    """A table panel built from instant queries (`format: table`)."""
    fc = _field_config(unit, align="auto", cellOptions={"type": "auto"}, inspect=False)
    fc["overrides"] = overrides or []
    options = {
        "showHeader": True,
        "cellHeight": "sm",
        "footer": {"show": False, "reducer": ["sum"], "fields": ""},
    }
    return _panel("table", title, desc, tgts, fc, options, (w, h), transformations or [])


def barchart(
    title: str,
    tgts: list[Json],
    unit: str,
    *,
    x_field: str,
    desc: str = "",
    w: int = 8,
    h: int = 8,
    transformations: list[Json] | None = None,
) -> Json:
    """Bars across runs: one bar per row of an instant `format: table` query."""
    fc = _field_config(unit, fillOpacity=80, lineWidth=1, gradientMode="none")
    options = {
        "xField": x_field,
        "orientation": "auto",
        "showValue": "auto",
        "barWidth": 0.8,
        "groupWidth": 0.7,
        "xTickLabelRotation": -30,
        "xTickLabelMaxLength": 24,
        **_list_legend(),
    }
    return _panel("barchart", title, desc, tgts, fc, options, (w, h), transformations or [])


def xychart(
    title: str,
    tgts: list[Json],
    *,
    x_unit: str,
    y_unit: str,
    desc: str = "",
    w: int = 12,
    h: int = 10,
    transformations: list[Json] | None = None,
) -> Json:
    """Points, first numeric field on x, the next on y (auto mapping)."""
    fc: Json = {
        "defaults": {
            "unit": y_unit,
            "custom": {"show": "points", "pointSize": {"fixed": 8}, "axisPlacement": "auto"},
        },
        "overrides": [{"matcher": {"id": "byType", "options": "number"}, "properties": []}],
    }
    options = {
        "seriesMapping": "auto",
        "mapping": "auto",
        "dims": {"frame": 0},
        **_list_legend(),
        "xUnit": x_unit,
    }
    return _panel("xychart", title, desc, tgts, fc, options, (w, h), transformations or [])


def text(title: str, content: str, *, w: int = 24, h: int = 3) -> Json:
    """A Markdown note (no query)."""
    return {
        "type": "text",
        "title": title,
        "options": {"mode": "markdown", "content": content},
        "_size": (w, h),
    }


def row(title: str) -> Json:
    """A collapsible row header spanning the dashboard width."""
    return {"type": "row", "title": title, "collapsed": False, "panels": [], "_size": (24, 1)}


def datasource_picker(name: str, label: str, kind: str, uid: str) -> Json:
    """A datasource template variable of type `kind` whose default is the provisioned `uid`."""
    return {
        "name": name,
        "label": label,
        "type": "datasource",
        "query": kind,
        "current": {"selected": True, "text": uid, "value": uid},
        "hide": 0,
        "includeAll": False,
        "multi": False,
        "options": [],
        "refresh": 1,
        "regex": "",
    }
