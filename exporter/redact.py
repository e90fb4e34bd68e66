"""Secret redaction for command lines, argument dicts, environments and URLs (standard library only).

A secret never reaches logs, labels, manifests or results: flag values and environment values
whose *name* looks secret are replaced by REDACTED, and `user:password@` in URLs is dropped.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

REDACTED = "<redacted>"
# A name (flag dest or env var) is secret when one of its `-`/`_` separated words is one of these:
# `--api-key`, `HF_TOKEN`, `OPENAI_API_KEY`, `--ssl-keyfile-password`; not `--max-num-batched-tokens`.
_SECRET_WORDS = frozenset(
    {
        "key",
        "apikey",
        "token",
        "secret",
        "password",
        "passwd",
        "credential",
        "credentials",
        "auth",
        "authorization",
        "bearer",
    }
)
_URL_USERINFO = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)[^/@\s]+@", re.I)


def is_secret_name(name: str) -> bool:
    """True when a flag or variable name (e.g. `--api-key`, `HF_TOKEN`) denotes a secret value."""
    words = re.split(r"[-_.]+", name.lstrip("-").lower())
    return any(word in _SECRET_WORDS for word in words)


def redact_url(text: str) -> str:
    """Drop `user:password@` from any URL inside `text`."""
    return _URL_USERINFO.sub(lambda m: f"{m.group('scheme')}{REDACTED}@", text)


def redact_argv(argv: Sequence[str]) -> list[str]:
    """Copy of a command line with secret flag values replaced (`--api-key X`, `--api-key=X`)."""
    out: list[str] = []
    hide_next = False
    for token in argv:
        if hide_next and not token.startswith("--"):
            out.append(REDACTED)
            hide_next = False
            continue
        hide_next = False
        if token.startswith("-") and "=" in token:
            flag, _, _value = token.partition("=")
            out.append(f"{flag}={REDACTED}" if is_secret_name(flag) else redact_url(token))
            continue
        if token.startswith("--") and is_secret_name(token):
            hide_next = True
        out.append(redact_url(token))
    return out


def redact_mapping(values: Mapping[str, Any]) -> dict[str, Any]:
    """Copy of an args or env mapping with secret-named values replaced, URLs scrubbed."""
    out: dict[str, Any] = {}
    for name, value in values.items():
        if is_secret_name(name) and value not in (None, "", False):
            out[name] = REDACTED
        elif isinstance(value, str):
            out[name] = redact_url(value)
        else:
            out[name] = value
    return out
