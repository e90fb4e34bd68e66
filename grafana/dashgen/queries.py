"""Every query a dashboard makes, Grafana's variable interpolation, and metric names inside PromQL.

Used by the tests that run each panel's query against a real Prometheus and that check every metric
name a dashboard or rule uses is one something emits.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

PROMQL_KEYWORDS = frozenset(
    {
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
        "bool",
        "and",
        "or",
        "unless",
        "offset",
        "inf",
        "nan",
        "Inf",
        "NaN",
        "atan2",
    }
)
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'')
_NAME_MATCHER = re.compile(r'__name__\s*=~?\s*"([^"]*)"')
_BRACES = re.compile(r"\{[^{}]*\}")
_RANGE = re.compile(r"\[[^\[\]]*\]")
_LABEL_LIST = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
_IDENT = re.compile(r"(?<![\w.:$])([A-Za-z_:][\w:]*)(\s*\()?")
_LABEL_VALUES = re.compile(r"^\s*label_values\((.*),\s*(\w+)\s*\)\s*$", re.S)
_VAR = re.compile(r"\$(\w+)|\$\{(\w+)(?::\w+)?\}|\[\[(\w+)\]\]")


@dataclass(frozen=True)
class Query:
    """One PromQL query of a dashboard: a panel target, an annotation or a template variable."""

    dashboard: str
    kind: str  # "panel" | "annotation" | "variable"
    title: str
    ref: str
    expr: str
    instant: bool = False


def _prometheus(node: Mapping[str, Any]) -> bool:
    """Whether a variable, annotation or target queries Prometheus (SQL ones: grafana.dashgen.sqlcheck)."""
    return bool((node.get("datasource") or {}).get("type") == "prometheus")


def iter_queries(board: Mapping[str, Any]) -> Iterator[Query]:
    """All Prometheus queries of one dashboard (rows' nested panels included)."""
    uid = str(board["uid"])
    for var in board.get("templating", {}).get("list", []):
        if var.get("type") == "query" and _prometheus(var):
            query = var["query"]
            expr = query["query"] if isinstance(query, dict) else str(query)
            yield Query(uid, "variable", var["name"], var["name"], expr)
    for ann in board.get("annotations", {}).get("list", []):
        if _prometheus(ann):
            yield Query(uid, "annotation", ann["name"], "A", ann["expr"])
    for panel in walk_panels(board.get("panels", [])):
        for tgt in panel.get("targets", []):
            if _prometheus(tgt):
                yield Query(uid, "panel", panel["title"], tgt["refId"], tgt["expr"], bool(tgt.get("instant")))


def walk_panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """Every panel, rows' nested panels included (depth first)."""
    for panel in panels:
        yield panel
        yield from walk_panels(panel.get("panels", []))


def grafana_intervals(range_s: float, scrape_s: float, max_points: int = 1000) -> dict[str, str]:
    """Grafana's built-in interval variables for a time range, as its Prometheus datasource sets them.

    $__interval = max(datasource timeInterval, range / max data points); $__rate_interval =
    max($__interval + scrape interval, 4 x scrape interval); $__range = the range in whole seconds.
    """
    interval = max(scrape_s, math.ceil(range_s / max_points))
    rate = max(interval + scrape_s, 4 * scrape_s)
    return {
        "__interval": f"{int(interval)}s",
        "__interval_ms": str(int(interval * 1000)),
        "__rate_interval": f"{int(rate)}s",
        "__range": f"{int(range_s)}s",
        "__range_s": str(int(range_s)),
        "__range_ms": str(int(range_s * 1000)),
    }


def interpolate(expr: str, values: Mapping[str, str]) -> str:
    """Replace $var, ${var} and [[var]] like Grafana; an unknown variable is an error."""

    def sub(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2) or match.group(3)
        if name not in values:
            raise KeyError(f"variable ${name} has no value (in {expr!r})")
        return values[name]

    return _VAR.sub(sub, expr)


def variable_names(expr: str) -> set[str]:
    """Names of the variables an expression refers to."""
    return {m.group(1) or m.group(2) or m.group(3) for m in _VAR.finditer(expr)}


def split_label_values(expr: str) -> tuple[str, str] | None:
    """`label_values(selector, label)` -> (selector, label); None for other variable queries."""
    match = _LABEL_VALUES.match(expr)
    return (match.group(1).strip(), match.group(2)) if match else None


def metric_names(expr: str) -> set[str]:
    """Metric names a PromQL expression (or a label_values() variable query) reads."""
    lv = split_label_values(expr)
    if lv:
        expr = lv[0]
    names: set[str] = set()
    for match in _NAME_MATCHER.finditer(expr):
        names.update(n for n in match.group(1).split("|") if n)
    text = _STRING.sub('""', expr)
    while True:  # innermost first: label lists and matchers may nest inside each other's parentheses
        stripped = _LABEL_LIST.sub(" ", _RANGE.sub(" ", _BRACES.sub(" ", text)))
        if stripped == text:
            break
        text = stripped
    for match in _IDENT.finditer(text):
        name, call = match.group(1), match.group(2)
        if call or name in PROMQL_KEYWORDS:
            continue
        names.add(name)
    return names
