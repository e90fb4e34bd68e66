"""A small HTTP/1.1 client for a run's few control-plane requests (preflight, engine metadata and
/metrics, the exporter's /manifest, /tokenize), so that a run with the raw client never imports
aiohttp: its import alone costs about 0.1 s of CPU at every start (it builds two TLS contexts and
loads the system's CA bundle), as much as ~150 requests of the load.

`PlainSession` is the part of `aiohttp.ClientSession` those calls use: `get` / `post` as async
context managers yielding a response with `status`, `read()`, `text()` and `json()`; `timeout=`
seconds for the whole exchange (TimeoutError). One connection per request (`Connection: close`);
bodies framed by Content-Length, chunked, or the connection's end; no compression asked for, and a
redirect is returned as it is, not followed (aiohttp follows one; none of these endpoints redirects).
Basic auth may ride in the URL (`user:password@`). An https URL is handed to a real aiohttp session,
imported then. Failures raise the `ClientError` subclasses below, named like aiohttp's so messages
read the same; `client_errors()` is the except tuple that covers these and, once aiohttp is loaded
(only then can it raise), its own.
"""

from __future__ import annotations

import asyncio
import base64
import json as jsonlib
import sys
from types import TracebackType
from typing import Any, Protocol
from urllib.parse import SplitResult, unquote, urlsplit

MAX_HEAD = 65536


class HttpSession(Protocol):
    """What the control-plane calls use of a session: a PlainSession or an aiohttp.ClientSession."""

    def get(self, url: str, *, headers: Any = ..., timeout: Any = ...) -> Any: ...

    def post(self, url: str, *, json: Any = ..., timeout: Any = ...) -> Any: ...


class ClientError(Exception):
    """Any failure of a plain request (aiohttp.ClientError's counterpart)."""


class ClientConnectorError(ClientError):
    """The connection could not be made (`os_error` says why)."""

    def __init__(self, host: str, port: int, os_error: OSError) -> None:
        self.os_error = os_error
        why = os_error.strerror or str(os_error) or type(os_error).__name__
        super().__init__(f"Cannot connect to host {host}:{port} ssl:default [{why}]")


class ServerDisconnectedError(ClientError):
    """The server closed the connection before a response head."""

    def __init__(self) -> None:
        super().__init__("Server disconnected")


class ClientResponseError(ClientError):
    """Bytes that are not (well-formed) HTTP; `message` says what."""

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(message)


class ClientPayloadError(ClientError):
    """A body cut short."""


def client_errors(*also: type[BaseException]) -> tuple[type[BaseException], ...]:
    """The client errors a request can raise (ours, plus aiohttp's where it is loaded), and `also`."""
    aiohttp = sys.modules.get("aiohttp")
    theirs: type[BaseException] | None = getattr(aiohttp, "ClientError", None)
    return (ClientError, *also) if theirs is None else (ClientError, theirs, *also)


KINDS = (  # (our class, aiohttp's class name, kind), in the order aiohttp's hierarchy needs them
    (ClientConnectorError, "ClientConnectorError", "connect"),
    (ClientResponseError, "ClientResponseError", "response"),
    (ClientPayloadError, "ClientPayloadError", "payload"),
    (ServerDisconnectedError, "ServerDisconnectedError", "disconnected"),
)


def error_kind(exc: BaseException) -> str:
    """`connect`, `response` (bytes that are not HTTP), `payload`, `disconnected` or `other`, for our
    errors and aiohttp's alike."""
    aiohttp = sys.modules.get("aiohttp")
    for own, name, kind in KINDS:
        theirs = getattr(aiohttp, name, None)
        if isinstance(exc, own) or (theirs is not None and isinstance(exc, theirs)):
            return kind
    return "other"


class PlainResponse:
    """A whole response: status, lower-cased header fields, body bytes."""

    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status, self.headers, self.body = status, headers, body

    async def read(self) -> bytes:
        return self.body

    async def text(self, encoding: str = "utf-8", errors: str = "strict") -> str:
        return self.body.decode(encoding, errors)

    async def json(self, content_type: str | None = None) -> Any:
        return jsonlib.loads(self.body)


class _Exchange:
    """`async with session.get(...) as resp`: the request runs on entry."""

    def __init__(self, session: PlainSession, method: str, url: str, kwargs: dict[str, Any]) -> None:
        self.session, self.method, self.url, self.kwargs = session, method, url, kwargs
        self.delegated: Any = None

    async def __aenter__(self) -> Any:
        if self.url.startswith("https://"):
            aio = await self.session.aiohttp_session()
            self.delegated = aio.request(self.method, self.url, **self.kwargs)
            return await self.delegated.__aenter__()
        timeout = self.kwargs.get("timeout")
        run = exchange(self.method, self.url, self.session.headers, self.kwargs)
        return await (asyncio.wait_for(run, float(timeout)) if timeout is not None else run)

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.delegated is not None:
            await self.delegated.__aexit__(kind, exc, tb)


class PlainSession:
    """aiohttp.ClientSession's `get` / `post` for control-plane requests (module docstring)."""

    def __init__(self, headers: dict[str, str] | None = None) -> None:
        self.headers = dict(headers or {})
        self._aiohttp: Any = None

    async def __aenter__(self) -> PlainSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._aiohttp is not None:
            await self._aiohttp.close()

    async def aiohttp_session(self) -> Any:
        """The aiohttp session https requests go through (created on first use)."""
        if self._aiohttp is None:
            import aiohttp  # only for https: TLS is aiohttp's

            self._aiohttp = aiohttp.ClientSession(headers=self.headers)
        return self._aiohttp

    def get(self, url: str, **kwargs: Any) -> _Exchange:
        return _Exchange(self, "GET", url, kwargs)

    def post(self, url: str, **kwargs: Any) -> _Exchange:
        return _Exchange(self, "POST", url, kwargs)


def url_basic_auth(parts: SplitResult) -> str | None:
    """`Basic ...`, the Authorization value of the credentials a URL carries (`user:password@`, as
    aiohttp sends them), or None when it carries none."""
    if parts.username is None:
        return None
    user = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
    return "Basic " + base64.b64encode(user.encode()).decode()


def request_bytes(method: str, url: str, headers: dict[str, str], kwargs: dict[str, Any]) -> bytes:
    """The request's bytes (head and body) for `url` with the session's and the call's headers."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = parts.netloc.rsplit("@", 1)[-1]
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    body: bytes = b""
    fields = {"Host": netloc, "Accept": "*/*", "Accept-Encoding": "identity", "Connection": "close"}
    basic = url_basic_auth(parts)
    if basic is not None:
        fields["Authorization"] = basic
    fields.update(headers)
    fields.update(kwargs.get("headers") or {})
    if kwargs.get("json") is not None:
        body = jsonlib.dumps(kwargs["json"]).encode()
        fields.setdefault("Content-Type", "application/json")
    elif kwargs.get("data") is not None:
        data = kwargs["data"]
        body = data.encode() if isinstance(data, str) else bytes(data)
    if body or method == "POST":
        fields["Content-Length"] = str(len(body))
    assert host, url
    head = "".join(f"{k}: {v}\r\n" for k, v in fields.items())
    return f"{method} {target} HTTP/1.1\r\n{head}\r\n".encode("latin-1") + body


async def exchange(method: str, url: str, headers: dict[str, str], kwargs: dict[str, Any]) -> PlainResponse:
    """One request on a fresh connection; the whole response."""
    data = request_bytes(method, url, headers, kwargs)
    parts = urlsplit(url)
    host, port = parts.hostname or "", parts.port or 80
    try:
        reader, writer = await asyncio.open_connection(host, port, limit=MAX_HEAD)
    except OSError as exc:
        raise ClientConnectorError(host, port, exc) from None
    try:
        writer.write(data)
        return await read_response(reader, method)
    except ConnectionError:
        raise ServerDisconnectedError() from None
    finally:
        writer.close()


async def read_response(reader: asyncio.StreamReader, method: str = "GET") -> PlainResponse:
    """Read one response (head, then the body as its framing says) from `reader`."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if not exc.partial:
            raise ServerDisconnectedError() from None
        raise ClientResponseError(f"invalid response head {exc.partial[:40]!r}") from None
    except asyncio.LimitOverrunError:
        raise ClientResponseError("response head too long") from None
    lines = head[:-4].decode("latin-1").split("\r\n")
    status = lines[0].split(" ", 2)
    if len(status) < 2 or not status[0].startswith("HTTP/1.") or not status[1].isdigit():
        raise ClientResponseError(f"invalid status line {lines[0][:80]!r}")
    code = int(status[1])
    fields = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in lines[1:])}
    if method == "HEAD" or code in (204, 304) or 100 <= code < 200:
        return PlainResponse(code, fields, b"")
    return PlainResponse(code, fields, await read_body(reader, fields))


async def read_body(reader: asyncio.StreamReader, fields: dict[str, str]) -> bytes:
    """The body, framed chunked, by Content-Length, or by the connection's end."""
    try:
        if fields.get("transfer-encoding", "").lower() == "chunked":
            return await _chunked(reader)
        if "content-length" in fields:
            try:
                length = int(fields["content-length"])
            except ValueError:
                raise ClientResponseError(f"invalid Content-Length {fields['content-length']!r}") from None
            return await reader.readexactly(length)
        return await reader.read()
    except asyncio.IncompleteReadError as exc:
        raise ClientPayloadError(f"Response payload is not completed ({len(exc.partial)} bytes)") from None
    except asyncio.LimitOverrunError:
        raise ClientResponseError("chunk size line too long") from None


async def _chunked(reader: asyncio.StreamReader) -> bytes:
    body: list[bytes] = []
    while True:
        line = await reader.readuntil(b"\r\n")
        try:
            size = int(line[:-2].split(b";", 1)[0].strip(), 16)
        except ValueError:
            raise ClientResponseError(f"Invalid character in chunk size: {line[:40]!r}") from None
        if size == 0:
            while await reader.readuntil(b"\r\n") != b"\r\n":  # trailer fields
                pass
            return b"".join(body)
        body.append(await reader.readexactly(size))
        if await reader.readexactly(2) != b"\r\n":
            raise ClientResponseError("chunk data not followed by CRLF")
