"""The one secret policy for every output: manifests, labels, logs, server info, results.

A value is secret when its *name* (flag, dict key or environment variable) has a secret word among
its `-`/`_`/`.` separated parts, singular or plural: `--api-key`, `--api-keys`, `HF_TOKEN`,
`db_passwd`, `auth_header`, `--bearer`, `key_path`, `ssl_keyfile_password`; not
`--max-num-batched-tokens` (a count of tokens, not a token). Multi-value flags (`--api-key k1 k2`)
hide every value; `--flag=value` forms too; `user:password@` in URLs is dropped everywhere. A list
of strings with a flag among them is a command line wherever it sits in a record (`config.sim_args`,
the embedded engine's argv, an exporter's engine args): `redact` hides its secret flags' values.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

REDACTED = "<redacted>"
_SECRET_WORDS = frozenset(
    {"key", "apikey", "token", "secret", "password", "passwd", "pwd", "credential", "auth"}
    | {"authorization", "bearer", "cookie", "signature", "private"}
)
# Plural tokens that count things, not secrets (`max_num_batched_tokens`, `prompt_tokens_total`).
_COUNTS = frozenset({"tokens"})
_URL_USERINFO = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)[^/@\s]+@", re.I)


def _word_is_secret(word: str) -> bool:
    if word in _SECRET_WORDS:
        return True
    return word not in _COUNTS and word.endswith("s") and word[:-1] in _SECRET_WORDS


def is_secret_name(name: str) -> bool:
    """True when a flag, key or variable name (`--api-keys`, `HF_TOKEN`, `db_passwd`) holds a secret."""
    words = [w for w in re.split(r"[-_.\s]+", str(name).lstrip("-").lower()) if w]
    return any(_word_is_secret(word) for word in words)


def redact_url(text: str) -> str:
    """Replace `user:password@` in any URL inside `text`."""
    return _URL_USERINFO.sub(lambda m: f"{m.group('scheme')}{REDACTED}@", text)


def redact_argv(argv: Sequence[str]) -> list[str]:
    """A command line with every value of a secret flag replaced (`--api-key k1 k2`, `--hf-token=x`)."""
    out: list[str] = []
    hiding = False
    for token in argv:
        if hiding and not token.startswith("-"):
            out.append(REDACTED)  # every value of a multi-value secret flag
            continue
        hiding = False
        if token.startswith("-") and "=" in token:
            name, _, _value = token.partition("=")
            out.append(f"{name}={REDACTED}" if is_secret_name(name) else redact_url(token))
            continue
        hiding = token.startswith("-") and is_secret_name(token)
        out.append(redact_url(token))
    return out


def is_argv(values: Sequence[Any]) -> bool:
    """True for a list that reads as a command line: all strings, at least one of them a flag."""
    return bool(values) and all(isinstance(v, str) for v in values) and any(v.startswith("-") for v in values)


def _hides(value: Any) -> bool:
    """A value worth hiding: not empty, and not a flag that only says whether a secret is set."""
    return value not in (None, "") and not isinstance(value, bool)


def redact(obj: Any) -> Any:
    """A copy of any JSON-like value with secret-named values replaced and URLs scrubbed, at any depth."""
    if isinstance(obj, Mapping):
        return {k: REDACTED if is_secret_name(str(k)) and _hides(obj[k]) else redact(obj[k]) for k in obj}
    if isinstance(obj, list | tuple):
        if is_argv(obj):  # a command line (`sim_args`, an engine's argv): values follow their flags
            return redact_argv(obj)
        return [redact(v) for v in obj]
    if isinstance(obj, str):
        return redact_url(obj)
    return obj


def redact_mapping(values: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of an args or env mapping with secrets hidden (the top level of `redact`)."""
    return dict(redact(values))
