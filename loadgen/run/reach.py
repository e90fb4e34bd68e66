"""Before the run: does the target answer `GET /v1/models` like an OpenAI-compatible server?

Each failure is one line naming the URL and what was seen (refused, a non-HTTP answer, an HTTP error,
a body that is not a model list), so the message points at the real cause. Reading (`preflight`) is
kept apart from judging the answer (`judge_models_answer`, pure).
"""

from __future__ import annotations

import json
from typing import Any

from loadgen.config import ConfigError
from loadgen.targets import Target
from loadgen.transport.plainhttp import HttpSession, client_errors, error_kind

PREFLIGHT_TIMEOUT = 10.0  # s, the whole /v1/models request
SHOWN_BODY_CHARS = 60
NOT_OPENAI = "which is not an OpenAI-compatible response"


class TargetUnreachable(ConfigError):
    """The target does not answer before the run (one line with the cause and a hint)."""


def shown(body: bytes) -> str:
    """The start of a body as one printable line (for an error message)."""
    text = body.decode("utf-8", "replace").strip()
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= SHOWN_BODY_CHARS else flat[: SHOWN_BODY_CHARS - 3] + "...")


def _one_line(detail: object) -> str:
    """An exception's detail as one line (aiohttp's parser errors span several)."""
    lines = str(detail).strip().splitlines()
    return lines[0].rstrip(":") if lines else "no detail"


def judge_models_answer(url: str, status: int, body: bytes) -> str | None:
    """The one-line error for a /v1/models answer, or None when it is a usable model list."""
    if status in (401, 403):
        return f"{url} refused the request (HTTP {status}): check --api-key"
    if status >= 500:
        seen = shown(body) if body.strip() else "empty body"
        return f"{url} answered HTTP {status} ({seen}): the server is failing, see its log"
    if status == 404:
        return None  # no model list (some servers): the model must then come from --model
    if status != 200:
        return f"{url} answered HTTP {status} ({shown(body)}), {NOT_OPENAI}"
    try:
        parsed: Any = json.loads(body)
    except ValueError:
        return f"{url} answered {shown(body) if body.strip() else 'an empty body'}, {NOT_OPENAI}"
    if not isinstance(parsed, dict) or not isinstance(parsed.get("data"), list):
        return f"{url} answered {shown(body)} (no 'data' list of models), {NOT_OPENAI}"
    return None


def unreachable(exc: BaseException, url: str, base_url: str, hint: str) -> str:
    """The one line for a preflight request that failed with the client error `exc`."""
    kind = error_kind(exc)
    if kind == "connect":
        os_error = getattr(exc, "os_error", None)
        cause = "connection refused" if isinstance(os_error, ConnectionRefusedError) else str(os_error)
        return f"cannot reach {base_url} ({cause}): {hint}"
    if kind == "response":  # bytes that are not (well-formed) HTTP
        detail = _one_line(getattr(exc, "message", exc))
        return (
            f"{url} answered with something that is not valid HTTP ({detail}), "
            f"{NOT_OPENAI}: is --base-url the engine's HTTP port?"
        )
    if kind == "payload":
        return f"{url} answered a broken HTTP body ({_one_line(exc)}), {NOT_OPENAI}"
    if kind == "disconnected":
        return f"{url} closed the connection without an answer, {NOT_OPENAI}"
    return f"cannot reach {base_url} ({type(exc).__name__}): {hint}"


async def preflight(session: HttpSession, target: Target, base_url: str, api_key: str | None) -> None:
    """Fail before the run when the target cannot be reached, refuses our key or is not OpenAI-like."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    url = f"{base_url}/v1/models"
    try:
        async with session.get(url, headers=headers, timeout=PREFLIGHT_TIMEOUT) as resp:
            status, body = resp.status, await resp.read()
    except TimeoutError:
        raise TargetUnreachable(
            f"{url} did not answer within {PREFLIGHT_TIMEOUT:g} s: {target.hint}"
        ) from None
    except client_errors() as exc:
        raise TargetUnreachable(unreachable(exc, url, base_url, target.hint)) from None
    problem = judge_models_answer(url, status, body)
    if problem:
        raise TargetUnreachable(problem)
