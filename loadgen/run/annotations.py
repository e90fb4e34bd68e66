"""Grafana run annotations through `grafana-client` (best effort: a warning, never a failed run).

When `GRAFANA_URL` (`--grafana-url`) is set, loadgen posts one annotation at the run's start
(`POST /api/annotations` with `time`, `tags`, `text`) and turns it into a region at the end
(`PATCH /api/annotations/<id>` with `timeEnd`); when the start could not be posted, the end posts the
whole region at once. The token (`GRAFANA_TOKEN`, a service-account token) goes in the
`Authorization: Bearer` header only; it never reaches logs or results. Dashboards also draw run
boundaries from Prometheus alone (`loadgen_run_start_timestamp_seconds`), so none of this is required.
"""

from __future__ import annotations

import logging
import time
from typing import Any
from urllib.parse import urlsplit, urlunsplit

log = logging.getLogger(__name__)

TIMEOUT_S = 2.0  # the runner calls these on its event loop: a slow Grafana must not stall the run
BASE_TAGS = ("infergauge",)


def _safe_url(url: str) -> str:
    """The URL without user:password, for messages."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _client(url: str, token: str | None) -> Any:
    from grafana_client import GrafanaApi  # imported lazily: only runs that annotate pay for it

    return GrafanaApi.from_url(url, credential=token or None, timeout=TIMEOUT_S)


def _tags(tags: list[str]) -> list[str]:
    return [*BASE_TAGS, *(t for t in tags if t not in BASE_TAGS)]


def _warn(action: str, url: str, exc: BaseException) -> None:
    # The exception text may echo request headers in some clients: keep only its type and status.
    status = getattr(exc, "status_code", None)
    detail = f"HTTP {status}" if status else type(exc).__name__
    log.warning("grafana annotation %s at %s failed (%s); the run goes on", action, _safe_url(url), detail)


def annotate_run_start(
    url: str | None, token: str | None, *, run_id: str, tags: list[str], text: str
) -> int | None:
    """Mark a run's start in Grafana; returns the annotation id, or None when not configured/failed."""
    if not url:
        return None
    try:
        api = _client(url, token)
        reply = api.annotations.add_annotation(time_from=int(time.time() * 1000), tags=_tags(tags), text=text)
        ann_id = reply.get("id") if isinstance(reply, dict) else None
        return int(ann_id) if ann_id is not None else None
    except Exception as exc:  # best effort by contract: any failure is a warning
        _warn(f"for run {run_id} start", url, exc)
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
    if not url:
        return
    try:
        api = _client(url, token)
        if annotation_id is None:
            api.annotations.add_annotation(time_from=start_ms, time_to=end_ms, tags=_tags(tags), text=text)
        else:
            api.annotations.partial_update_annotation(
                annotation_id, time_from=start_ms, time_to=end_ms, tags=_tags(tags), text=text
            )
    except Exception as exc:
        _warn(f"for run {run_id} end", url, exc)


def post_annotation(
    url: str | None, token: str | None, *, time_ms: int, tags: list[str], text: str, what: str
) -> int | None:
    """Post one point annotation (a baseline change point, say); its id, or None when not configured or
    it failed (a warning naming `what`)."""
    if not url:
        return None
    try:
        reply = _client(url, token).annotations.add_annotation(time_from=time_ms, tags=_tags(tags), text=text)
        ann_id = reply.get("id") if isinstance(reply, dict) else None
        return int(ann_id) if ann_id is not None else None
    except Exception as exc:  # best effort by contract: any failure is a warning
        _warn(f"for {what}", url, exc)
        return None
