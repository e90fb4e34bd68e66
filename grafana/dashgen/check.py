"""Run every query of every dashboard against a Prometheus (and, with --postgres, every SQL query
against the results store), the way Grafana would, and say which are empty.

    python -m grafana.dashgen.check --prometheus http://127.0.0.1:9090 --minutes 30 [--var run_id=ID]
        [--postgres postgresql://USER@HOST/DB] [--dashboard UID ...]

Template variables get the value given with --var, else "All" where the variable allows it, else the
first value Prometheus offers in Grafana's sort order (newest run first); SQL variables, the value
given or every value their query offers (grafana.dashgen.sqlcheck). Exit 0 when every panel,
annotation and variable query returned data, 1 otherwise, 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import urllib.parse
import urllib.request
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from . import DASHBOARD_DIR
from .queries import Query, grafana_intervals, interpolate, iter_queries, split_label_values
from .sqlcheck import check_board, psycopg_execute
from .sqlmacros import TimeRange


@dataclass(frozen=True)
class Outcome:
    """One query's result: how many series came back with at least one number."""

    dashboard: str
    kind: str
    title: str
    ref: str
    expr: str
    series: int


class Prometheus:
    """The few HTTP API calls the check needs."""

    def __init__(self, url: str, timeout_s: float = 30.0) -> None:
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s

    def get(self, endpoint: str, **params: str) -> Any:
        query = urllib.parse.urlencode(params)
        with urllib.request.urlopen(f"{self.url}/api/v1/{endpoint}?{query}", timeout=self.timeout_s) as resp:
            payload = json.loads(resp.read())
        if payload.get("status") != "success":
            raise RuntimeError(f"{endpoint}: {payload.get('error')}")
        data = payload["data"]
        return data["result"] if isinstance(data, dict) and "result" in data else data


def numbered_series(result: list[dict[str, Any]]) -> int:
    """Series holding at least one sample that is a number (Grafana draws nothing for NaN)."""
    count = 0
    for series in result:
        samples = series.get("values") or [series.get("value")]
        if any(s and not math.isnan(float(s[1])) for s in samples):
            count += 1
    return count


def variable_values(
    prom: Prometheus, board: dict[str, Any], given: dict[str, str], start: float, end: float
) -> dict[str, str]:
    """Values for the dashboard's variables, resolved in order (later ones may use earlier ones)."""
    values: dict[str, str] = {}
    for var in board.get("templating", {}).get("list", []):
        name = var["name"]
        if name in given:
            values[name] = given[name]
        elif var["type"] == "textbox":
            values[name] = str(var.get("query", ""))
        elif var.get("includeAll"):
            values[name] = var.get("allValue") or ".*"
        elif var["type"] == "query":
            offered = label_values(prom, interpolate(str(var["query"]), values), start, end)
            ordered = sorted(offered, reverse=var.get("sort") in (2, 4, 6))
            values[name] = ordered[0] if ordered else ""
    return values


def label_values(prom: Prometheus, expr: str, start: float, end: float) -> set[str]:
    """What `label_values(selector, label)` offers over the time range."""
    parsed = split_label_values(expr)
    if parsed is None:
        raise ValueError(f"not a label_values() query: {expr}")
    selector, label = parsed
    series = prom.get("series", **{"match[]": selector, "start": f"{start:.3f}", "end": f"{end:.3f}"})
    return {s[label] for s in series if label in s}


def run_query(
    prom: Prometheus, query: Query, values: dict[str, str], start: float, end: float, scrape_s: float
) -> int:
    """Numbered series one query returns (range queries over [start, end], instant ones at end)."""
    builtins = grafana_intervals(end - start, scrape_s)
    expr = interpolate(query.expr, {**values, **builtins})
    if query.kind == "variable":
        return len(label_values(prom, expr, start, end))
    if query.instant:
        return numbered_series(prom.get("query", query=expr, time=f"{end:.3f}"))
    return numbered_series(
        prom.get(
            "query_range", query=expr, start=f"{start:.3f}", end=f"{end:.3f}", step=builtins["__interval"]
        )
    )


def check(
    prom: Prometheus,
    boards: list[dict[str, Any]],
    given: dict[str, str],
    start: float,
    end: float,
    scrape_s: float,
) -> list[Outcome]:
    """Every query of every dashboard, with its number of series."""
    outcomes = []
    for board in boards:
        values = variable_values(prom, board, given, start, end)
        for q in iter_queries(board):
            outcomes.append(
                Outcome(
                    q.dashboard,
                    q.kind,
                    q.title,
                    q.ref,
                    q.expr,
                    run_query(prom, q, values, start, end, scrape_s),
                )
            )
    return outcomes


def _parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m grafana.dashgen.check", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--prometheus", default="http://127.0.0.1:9090", help="Prometheus base URL")
    parser.add_argument("--minutes", type=float, default=30.0, help="time range ending now")
    parser.add_argument(
        "--scrape", type=float, default=5.0, help="scrape interval (datasource timeInterval), s"
    )
    parser.add_argument("--var", action="append", default=[], metavar="NAME=VALUE", help="variable value")
    parser.add_argument("--dir", type=Path, default=DASHBOARD_DIR, help="dashboard JSON directory")
    parser.add_argument("--json", type=Path, default=None, help="also write the outcomes as JSON here")
    parser.add_argument("--postgres", default=None, help="results store (libpq URI): run the SQL queries too")
    parser.add_argument("--dashboard", action="append", default=[], metavar="UID", help="only this dashboard")
    args = parser.parse_args(argv)
    bad = [v for v in args.var if "=" not in v]
    if bad or args.minutes <= 0 or args.scrape <= 0:
        parser.error(
            f"invalid --var {bad[0]!r} (expected NAME=VALUE)" if bad else "--minutes/--scrape must be > 0"
        )
    return args


def sql_outcomes(
    url: str, boards: list[dict[str, Any]], given: dict[str, str], start: float, end: float
) -> list[Outcome]:
    """Every SQL query of the boards against the PostgreSQL at `url`; `series` = rows when usable."""
    import psycopg

    span = TimeRange(datetime.fromtimestamp(start, UTC), datetime.fromtimestamp(end, UTC))
    out = []
    with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
        for board in boards:
            sql_given = {k: [v] for k, v in given.items()}
            for o in check_board(psycopg_execute(conn), board, span, sql_given):
                q = o.query
                out.append(
                    Outcome(q.dashboard, q.kind, q.title, q.ref, o.expanded, 0 if o.problem else o.rows)
                )
    return out


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    args = _parse_args(sys.argv[1:] if argv is None else argv)
    boards = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(args.dir.glob("*.json"))]
    if args.dashboard:
        unknown = set(args.dashboard) - {b["uid"] for b in boards}
        if unknown:
            print(f"error: no dashboard with uid {sorted(unknown)[0]!r} in {args.dir}", file=sys.stderr)
            return 2
        boards = [b for b in boards if b["uid"] in args.dashboard]
    given = dict(v.split("=", 1) for v in args.var)
    end = time.time()
    start = end - args.minutes * 60
    try:
        outcomes = check(Prometheus(args.prometheus), boards, given, start, end, args.scrape)
    except (OSError, RuntimeError, ValueError) as exc:
        print(f"error: querying {args.prometheus} failed: {exc}", file=sys.stderr)
        return 1
    if args.postgres:
        try:
            outcomes += sql_outcomes(args.postgres, boards, given, start, end)
        except Exception as exc:  # noqa: BLE001 - a driver error of any kind: one line, exit 1
            first = (str(exc).splitlines() or [type(exc).__name__])[0]
            print(f"error: querying the results store failed: {first}", file=sys.stderr)
            return 1
    for o in outcomes:
        print(
            f"{'ok   ' if o.series else 'EMPTY'} {o.series:3d}  {o.dashboard}  {o.kind}  {o.title} [{o.ref}]"
        )
    empty = [o for o in outcomes if not o.series]
    print(f"{len(outcomes) - len(empty)}/{len(outcomes)} queries returned data")
    if args.json:
        args.json.write_text(json.dumps([asdict(o) for o in outcomes], indent=1))
    return 1 if empty else 0


if __name__ == "__main__":
    sys.exit(main())
