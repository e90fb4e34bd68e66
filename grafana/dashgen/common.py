"""Panel shortcuts the dashboards share: one-query time series, histogram quantiles, info tables."""

from __future__ import annotations

from .panels import Json, table, target, timeseries

QUANTILES = ("0.5", "0.9", "0.99")


def series(
    title: str,
    expr: str,
    legend: str,
    unit: str,
    *,
    desc: str = "",
    w: int = 12,
    h: int = 8,
    stack: bool = False,
) -> Json:
    """A time series panel of one query."""
    return timeseries(title, [target(expr, legend)], unit, desc=desc, w=w, h=h, stack=stack)


def quantile_pairs(bucket: str, qs: tuple[str, ...] = QUANTILES) -> list[tuple[str, str]]:
    """(expr, legend "pNN") per quantile of a histogram; `bucket` is the selected series, `x_bucket{...}`."""
    return [
        (
            f"histogram_quantile({q}, sum by (le) (rate({bucket}[$__rate_interval])))",
            f"p{int(float(q) * 100)}",
        )
        for q in qs
    ]


def info_table(
    title: str, expr: str, *, transformations: list[Json] | None = None, w: int = 24, h: int = 10
) -> Json:
    """A table of one instant `format: table` query (info series: one row per label set)."""
    return table(title, [target(expr, instant=True, fmt="table")], transformations=transformations, w=w, h=h)


def organize(hide: dict[str, bool]) -> list[Json]:
    """An "organize" transformation hiding the columns in `hide`."""
    return [{"id": "organize", "options": {"excludeByName": hide, "renameByName": {}, "indexByName": {}}}]
