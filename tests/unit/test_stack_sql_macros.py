"""Grafana's PostgreSQL macros and SQL variable formatting, as the datasource applies them."""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # grafana/dashgen lives beside the packages, not inside one
    sys.path.insert(0, str(REPO))

from grafana.dashgen.sqlmacros import (  # noqa: E402
    Selection,
    TimeRange,
    expand,
    expand_macros,
    interpolate_variables,
    rfc3339,
)

RANGE = TimeRange(datetime(2026, 12, 1, 1, 0, tzinfo=UTC), datetime(2026, 12, 2, 1, 0, 0, 250000, tzinfo=UTC))


def test_time_filter_is_a_between_of_rfc3339_utc_times() -> None:
    sql = expand_macros("SELECT 1 FROM runs WHERE $__timeFilter( started_at )", RANGE)
    assert (
        sql
        == "SELECT 1 FROM runs WHERE started_at BETWEEN '2026-12-01T01:00:00Z' AND '2026-12-02T01:00:00.25Z'"
    )


def test_time_from_to_and_time_column_macros() -> None:
    sql = expand_macros(
        "SELECT $__time(started_at), $__timeEpoch(t) WHERE t > $__timeFrom() AND t < $__timeTo()", RANGE
    )
    assert sql == (
        'SELECT started_at AS "time", extract(epoch from t) as "time" '
        "WHERE t > '2026-12-01T01:00:00Z' AND t < '2026-12-02T01:00:00.25Z'"
    )
    # 2026-12-01T01:00:00Z is 1796086800 s after the epoch
    assert expand_macros("$__unixEpochFrom() $__unixEpochFilter(ts)", RANGE) == (
        "1796086800 ts >= 1796086800 AND ts <= 1796173200"
    )


def test_times_in_another_zone_are_written_in_utc() -> None:
    paris = timezone(timedelta(hours=1))
    assert rfc3339(datetime(2026, 12, 1, 2, 0, 0, 123000, tzinfo=paris)) == "2026-12-01T01:00:00.123Z"


def test_multi_value_and_include_all_variables_are_quoted_lists() -> None:
    variables = {
        "suite": Selection(("nightly", "o'clock"), multi=True),
        "series": Selection(("a",), multi=True),  # one value of a multi-value variable: still quoted
        "limit": Selection(("it's",)),  # a single-value variable: bare, quotes doubled
    }
    sql = interpolate_variables(
        "IN ($suite) AND IN (${series}) AND x = '$limit' AND [[suite:raw]]", variables, RANGE
    )
    assert sql == "IN ('nightly','o''clock') AND IN ('a') AND x = 'it''s' AND nightly,o'clock"


def test_from_and_to_are_epoch_milliseconds_and_macros_are_left_for_the_backend() -> None:
    sql = interpolate_variables("$__from $__to $__timeFilter(t)", {}, RANGE)
    assert sql == "1796086800000 1796173200250 $__timeFilter(t)"


def test_expand_does_variables_then_macros() -> None:
    sql = expand(
        "SELECT $__time(started_at) FROM runs WHERE $__timeFilter(started_at) AND suite IN ($suite)",
        {"suite": Selection(("e2e",), multi=True)},
        RANGE,
    )
    assert sql == (
        "SELECT started_at AS \"time\" FROM runs WHERE started_at BETWEEN '2026-12-01T01:00:00Z' "
        "AND '2026-12-02T01:00:00.25Z' AND suite IN ('e2e')"
    )


@pytest.mark.parametrize(
    ("sql", "named"),
    [
        ("WHERE $__timeGroupz(t, '1h')", "$__timeGroupz"),
        ("WHERE $__timeFilter()", "$__timeFilter"),
        ("WHERE suite IN ($nosuch)", "$nosuch"),
        ("WHERE ${suite:percentencode}", "'percentencode'"),
    ],
)
def test_what_grafana_would_refuse_is_an_error_naming_it(sql: str, named: str) -> None:
    with pytest.raises(ValueError, match=named.replace("$", r"\$")):
        expand(sql, {"suite": Selection(("e2e",), multi=True)}, RANGE)
