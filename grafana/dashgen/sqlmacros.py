"""A SQL panel's query as Grafana's PostgreSQL datasource sends it to the database.

Two steps, as in Grafana: the frontend replaces template variables (`$var`, `${var}`, `${var:fmt}`,
`[[var]]`) with the datasource's formatting (SqlDatasource.interpolateVariable: a multi-value or
include-All variable becomes `'a','b'` with quotes doubled, a single-value one its value with quotes
doubled), `$__from` / `$__to` become epoch milliseconds; then the backend expands the macros
(pkg/tsdb/grafana-postgresql-datasource/macros.go):
  $__time(col) -> col AS "time"          $__timeEpoch(col) -> extract(epoch from col) as "time"
  $__timeFilter(col) -> col BETWEEN 'FROM' AND 'TO' (RFC 3339, UTC, as Go's time.RFC3339Nano writes it)
  $__timeFrom() -> 'FROM'   $__timeTo() -> 'TO'   $__unixEpochFrom() / $__unixEpochTo() -> seconds
  $__unixEpochFilter(col) -> col >= FROM_S AND col <= TO_S
A macro Grafana would refuse (unknown name, missing column) raises ValueError naming it, as does a
variable without a value.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

# Grafana's variable syntax (public/app/features/variables/utils.ts variableRegex)
_VARIABLE = re.compile(r"\$(\w+)|\[\[(\w+?)(?::(\w+))?\]\]|\$\{(\w+)(?::([^}]+))?\}")
_MACRO = re.compile(r"\$([_a-zA-Z0-9]+)\(([^)]*)\)")  # macros.go sExpr


@dataclass(frozen=True)
class Selection:
    """The values a template variable has, and whether it is multi-value or include-All (quoted)."""

    values: tuple[str, ...]
    multi: bool = False


@dataclass(frozen=True)
class TimeRange:
    """The dashboard's time range (aware datetimes)."""

    start: datetime
    end: datetime


def quote_literal(value: str) -> str:
    """`it's` -> `'it''s'` (PostgresQueryModel.quoteLiteral)."""
    return "'" + value.replace("'", "''") + "'"


def _formatted(selection: Selection, fmt: str | None) -> str:
    values = selection.values
    if fmt is None:  # the datasource's own formatting
        if selection.multi or len(values) != 1:
            return ",".join(quote_literal(v) for v in values)
        return values[0].replace("'", "''")
    if fmt == "raw":
        return ",".join(values)
    if fmt == "csv":
        return ",".join(values)
    if fmt in ("singlequote", "sqlstring"):
        return ",".join(quote_literal(v) for v in values)
    if fmt == "doublequote":
        return ",".join('"' + v.replace('"', '\\"') + '"' for v in values)
    raise ValueError(
        f"unsupported variable format {fmt!r}: use raw, csv, singlequote, sqlstring or doublequote"
    )


def interpolate_variables(sql: str, variables: Mapping[str, Selection], time_range: TimeRange) -> str:
    """Template variables replaced (macros, `$__name(...)`, are left for `expand_macros`)."""
    builtins = {
        "__from": str(int(time_range.start.timestamp() * 1000)),
        "__to": str(int(time_range.end.timestamp() * 1000)),
    }

    def sub(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2) or match.group(4)
        fmt = match.group(3) or match.group(5)
        if name in variables:
            return _formatted(variables[name], fmt)
        if name in builtins:
            return builtins[name]
        if name.startswith("__"):  # a backend macro (or Grafana's own variable the backend knows)
            return match.group(0)
        raise ValueError(f"variable ${name} has no value (in {sql!r})")

    return _VARIABLE.sub(sub, sql)


def rfc3339(when: datetime) -> str:
    """Go's time.RFC3339Nano in UTC: `2026-12-01T01:00:00Z`, `2026-12-01T01:00:00.5Z`."""
    text = when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")
    fraction = f"{when.microsecond:06d}".rstrip("0")
    return f"{text}.{fraction}Z" if fraction else f"{text}Z"


def _column(name: str, args: Sequence[str]) -> str:
    if not args or not args[0]:
        raise ValueError(f"missing time column argument for macro ${name}")
    return args[0]


def _macros(r: TimeRange) -> dict[str, Callable[[Sequence[str]], str]]:
    start, end = rfc3339(r.start), rfc3339(r.end)
    start_s, end_s = int(r.start.timestamp()), int(r.end.timestamp())
    return {
        "__time": lambda a: f'{_column("__time", a)} AS "time"',
        "__timeEpoch": lambda a: f'extract(epoch from {_column("__timeEpoch", a)}) as "time"',
        "__timeFilter": lambda a: f"{_column('__timeFilter', a)} BETWEEN '{start}' AND '{end}'",
        "__timeFrom": lambda a: f"'{start}'",
        "__timeTo": lambda a: f"'{end}'",
        "__unixEpochFrom": lambda a: str(start_s),
        "__unixEpochTo": lambda a: str(end_s),
        "__unixEpochFilter": lambda a: (
            f"{_column('__unixEpochFilter', a)} >= {start_s} AND {a[0]} <= {end_s}"
        ),
    }


def expand_macros(sql: str, time_range: TimeRange) -> str:
    """Every `$__macro(args)` expanded as Grafana's PostgreSQL backend does."""
    macros = _macros(time_range)

    def sub(match: re.Match[str]) -> str:
        name, args = match.group(1), [a.strip() for a in match.group(2).split(",")]
        if name not in macros:
            raise ValueError(f"unknown macro ${name} (in {sql!r}): supported are {', '.join(sorted(macros))}")
        return macros[name](args)

    return _MACRO.sub(sub, sql)


def expand(sql: str, variables: Mapping[str, Selection], time_range: TimeRange) -> str:
    """The SQL Grafana would run: variables first (frontend), then macros (backend)."""
    return expand_macros(interpolate_variables(sql, variables, time_range), time_range)
