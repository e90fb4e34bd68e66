"""`loadgen grafana push`: upload infergauge's dashboards to an existing Grafana (no file provisioning)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import click

# a source checkout (editable install), the current directory, then the Docker image's copy
DASHBOARD_DIRS = (
    Path(__file__).resolve().parents[2] / "grafana" / "dashboards",
    Path("grafana") / "dashboards",
    Path("/opt/infergauge/grafana/dashboards"),
)
DATASOURCE_UID = "infergauge-prometheus"  # the uid grafana/provisioning/datasources/prometheus.yml gives
TIMEOUT_S = 10.0


def load_dashboards(directory: Path) -> list[dict[str, Any]]:
    """Every dashboard JSON of `directory`, sorted by file name."""
    boards = []
    for path in sorted(directory.glob("*.json")):
        board = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(board, dict) or not board.get("uid"):
            raise click.UsageError(f"{path} is not a dashboard with a uid")
        boards.append(board)
    return boards


def retarget_datasource(node: Any, uid: str) -> Any:
    """Replace the provisioned Prometheus datasource uid everywhere in a dashboard (the datasource
    variable's default included)."""
    if isinstance(node, dict):
        if node.get("type") == "prometheus" and node.get("uid") == DATASOURCE_UID:
            return {**node, "uid": uid}
        if node.get("type") == "datasource" and node.get("current", {}).get("value") == DATASOURCE_UID:
            return {**node, "current": {**node["current"], "text": uid, "value": uid}}
        return {k: retarget_datasource(v, uid) for k, v in node.items()}
    if isinstance(node, list):
        return [retarget_datasource(v, uid) for v in node]
    return node


def push_payload(board: dict[str, Any], folder_uid: str) -> dict[str, Any]:
    """The body of `POST /api/dashboards/db` for one dashboard (overwrite by uid)."""
    return {
        "dashboard": {**board, "id": None},
        "folderUid": folder_uid,
        "overwrite": True,
        "message": "loadgen grafana push",
    }


def _ensure_folder(api: Any, uid: str, title: str) -> None:
    from grafana_client.client import GrafanaClientError

    try:
        api.folder.get_folder(uid)
    except GrafanaClientError as exc:
        if getattr(exc, "status_code", None) != 404:
            raise
        api.folder.create_folder(title, uid=uid)


def _check_url(url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise click.BadParameter(f"{url!r}: expected http(s)://host[:port][/path]", param_hint="--url")


@click.group()
def grafana() -> None:
    """Grafana helpers (dashboards are also provisioned from files by docker-compose)."""


@grafana.command()
@click.option("--url", envvar="GRAFANA_URL", required=True, help="Grafana base URL [env GRAFANA_URL].")
@click.option(
    "--token",
    envvar="GRAFANA_TOKEN",
    default=None,
    help="Service-account token [env GRAFANA_TOKEN]; or user:password in --url.",
)
@click.option(
    "--folder", default="infergauge", show_default=True, help="Folder title (and uid) to put them in."
)
@click.option(
    "--datasource-uid",
    default=DATASOURCE_UID,
    show_default=True,
    help="uid of your Prometheus datasource in that Grafana.",
)
@click.option(
    "--dir",
    "directory",
    type=click.Path(path_type=Path),
    default=None,
    help="Directory of dashboard JSON files [default: the checkout's or image's grafana/dashboards].",
)
def push(url: str, token: str | None, folder: str, datasource_uid: str, directory: Path | None) -> None:
    """Upload every dashboard JSON to an existing Grafana, overwriting by uid."""
    _check_url(url)
    if directory is None:
        directory = next((d for d in DASHBOARD_DIRS if d.is_dir()), DASHBOARD_DIRS[0])
    if not directory.is_dir():
        raise click.BadParameter(f"{str(directory)!r} is not a directory", param_hint="--dir")
    boards = load_dashboards(directory)
    if not boards:
        raise click.BadParameter(f"no *.json dashboards in {str(directory)!r}", param_hint="--dir")
    from grafana_client import GrafanaApi

    api = GrafanaApi.from_url(url, credential=token or None, timeout=TIMEOUT_S)
    try:
        _ensure_folder(api, folder, folder)
        for board in boards:
            if datasource_uid != DATASOURCE_UID:
                board = retarget_datasource(board, datasource_uid)
            reply = api.dashboard.update_dashboard(push_payload(board, folder))
            click.echo(f"{board['uid']}: {reply.get('status', 'ok')} {reply.get('url', '')}".rstrip())
    except Exception as exc:  # any client or network failure: one line, exit 1
        status = getattr(exc, "status_code", None)
        detail = f"HTTP {status}: {getattr(exc, 'message', '')}" if status else type(exc).__name__
        raise click.ClickException(f"grafana push to {urlsplit(url).hostname} failed ({detail})") from None
