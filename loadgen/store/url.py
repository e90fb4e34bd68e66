"""Store URLs: `sqlite:///PATH`, `postgresql://USER@HOST[:PORT]/DB`, or `none`; passwords kept out of text."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

DEFAULT_FILE = "infergauge.db"
OFF = "none"
SCHEMES = {"sqlite": "sqlite", "postgresql": "postgresql", "postgres": "postgresql"}
USAGE = "use sqlite:///PATH, postgresql://USER@HOST/DB or none"


class StoreURLError(ValueError):
    """A --store value that names no store this loadgen can open."""


@dataclass(frozen=True)
class StoreURL:
    """Where the store is: its dialect, what the driver connects to, and the text safe to print."""

    dialect: str
    target: str = field(repr=False)  # a sqlite path or a libpq URI (may hold a password)
    public: str
    secret: str | None = field(default=None, repr=False)

    def scrub(self, text: str) -> str:
        """`text` with the URL's password (if any) replaced by `***`."""
        return text.replace(self.secret, "***") if self.secret else text


def default_store(results_dir: str | Path) -> str:
    """The default store of a results dir: `sqlite:///<results-dir>/infergauge.db`."""
    return f"sqlite:///{Path(results_dir) / DEFAULT_FILE}"


def parse_store(value: str | None, results_dir: str | Path) -> StoreURL | None:
    """A --store value (None: the default SQLite file under `results_dir`; `none`: off)."""
    text = default_store(results_dir) if value is None else value.strip()
    if text.lower() == OFF:
        return None
    scheme = text.split(":", 1)[0].lower() if "://" in text else ""
    dialect = SCHEMES.get(scheme)
    if dialect is None:
        raise StoreURLError(f"unknown store {public_text(text)!r}: {USAGE}")
    if dialect == "sqlite":
        path = text.split("://", 1)[1][1:]  # sqlite:///rel/x.db -> rel/x.db, sqlite:////abs -> /abs
        if not path:
            raise StoreURLError(f"store {text!r} names no file: {USAGE}")
        return StoreURL("sqlite", path, text)
    parts = urlsplit(text)
    if not parts.path.strip("/") and not parts.hostname:
        raise StoreURLError(f"store {public_text(text)!r} names no host or database: {USAGE}")
    secret = parts.password or dict(parse_qsl(parts.query)).get("password")
    return StoreURL("postgresql", text, public_text(text), secret)


def public_text(url: str) -> str:
    """`url` without a password (in the user part or a `password=` query parameter); the user is kept."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return "<unparseable store URL>"
    netloc = parts.netloc
    if password is not None:
        userinfo, _, hostport = netloc.rpartition("@")
        netloc = f"{userinfo.split(':', 1)[0]}@{hostport}"
    query = urlencode([(k, v) for k, v in parse_qsl(parts.query) if k.lower() != "password"])
    return urlunsplit(parts._replace(netloc=netloc, query=query))
