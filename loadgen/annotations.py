"""Grafana run annotations (best effort). Implemented by the stack part; see docs/CONTRACTS.md."""

from __future__ import annotations


def annotate_run_start(url: str | None, token: str | None, *, run_id: str, tags: list[str], text: str) -> int | None:
    """Mark a run's start in Grafana; returns the annotation id, or None when not configured/failed."""
    return None


def annotate_run_end(
    url: str | None,
    token: str | None,
    annotation_id: int | None,
    *,
    run_id: str,
    tags: list[str],
    text: str,
    start_ms: int,
    end_ms: int,
) -> None:
    """Close the run's annotation (timeEnd), or post a region when the start was not recorded."""
    return None
