"""Change points as Grafana annotations (grafana-client), when a Grafana URL is given.

After each check, every open confirmed change of the store's `changes` table that has no annotation
yet is posted once (`POST /api/annotations`: time = start of the first run after the change, tags,
a text naming the metric, its size and the top-ranked cause) and its annotation id recorded, so a
later check does not post it again and a Grafana that was down gets it at the next check. The token
goes in the Authorization header only. A failure is one warning per check (the first post that fails
ends the check's posting: the rest wait for the next check), never a failed check.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from loadgen.baseline.causes import NO_DIFFERENCE
from loadgen.run.annotations import post_annotation
from loadgen.store.changes import set_annotation, unannotated
from loadgen.store.db import open_store
from loadgen.store.rows import number, timestamp
from loadgen.store.url import StoreURL

TAGS = ("baseline", "change-point")


def annotation_time_ms(row: Mapping[str, Any]) -> int:
    """The start of the first run after the change, epoch milliseconds."""
    when = row["first_after_at"]
    if not isinstance(when, datetime):
        when = timestamp(str(when))
    if when is None:
        raise ValueError(f"change {row['first_run_after']} has no start time")
    return int(when.timestamp() * 1000)


def annotation_tags(row: Mapping[str, Any]) -> list[str]:
    """Tags a dashboard can filter on: suite, series, metric, kind and status."""
    return [
        *TAGS,
        f"suite:{row['suite']}",
        f"series:{row['series_key']}",
        f"metric:{row['metric']}",
        str(row["kind"]),
        str(row["status"]),
    ]


def annotation_text(row: Mapping[str, Any]) -> str:
    """`regression: TPOT p99 +15.0% (0.01 -> 0.0115 s) in s/a@x at run07; cause: engine.version: ...`."""
    size = number(row.get("relative_size"))
    change = f"{size * 100:+.1f}%" if size is not None else "changed"
    unit = f" {row['unit']}" if row.get("unit") else ""
    medians = f"{row['before_median']:.6g} -> {row['after_median']:.6g}{unit}"
    cause = row.get("cause") or NO_DIFFERENCE
    return (
        f"{row['kind']}: {row['metric_label']} {change} ({medians}) in {row['series_key']} "
        f"at {row['first_run_after']}; cause: {cause}"
    )


def annotate_changes(
    url: StoreURL, grafana_url: str | None, token: str | None, log: Callable[[str], None] = print
) -> int:
    """Post the store's open confirmed changes that have no annotation yet; returns how many were posted."""
    if not grafana_url:
        return 0
    posted = 0
    with open_store(url) as store:
        for row in unannotated(store):
            what = f"change {row['metric']} of {row['series_key']} at {row['first_run_after']}"
            tags, text = annotation_tags(row), annotation_text(row)
            ann_id = post_annotation(
                grafana_url, token, time_ms=annotation_time_ms(row), tags=tags, text=text, what=what
            )
            if ann_id is None:  # Grafana is down: one warning, the rest wait for the next check
                break
            set_annotation(store, row, ann_id)
            posted += 1
    if posted:
        log(f"grafana: {posted} change point(s) annotated")
    return posted
