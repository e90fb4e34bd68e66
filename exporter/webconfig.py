"""`--web-config-file` in Prometheus exporter-toolkit's format: TLS certificate and basic-auth users.

    tls_server_config:
      cert_file: server.crt        # relative paths are relative to this file
      key_file: server.key
    basic_auth_users:
      prometheus: $2y$10$...       # bcrypt hash (htpasswd -nBC 10 "" | tr -d ':\\n')

bcrypt is imported only when basic-auth users are configured.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import ssl
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

KNOWN_KEYS = ("tls_server_config", "basic_auth_users", "http_server_config")


class WebConfigError(ValueError):
    """A web config file that cannot be used; the message names the bad value."""


@dataclass
class WebConfig:
    """TLS files and basic-auth users; `check()` verifies an Authorization header."""

    cert_file: Path | None = None
    key_file: Path | None = None
    users: dict[str, str] = field(default_factory=dict)
    _ok_cache: set[str] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def ssl_context(self) -> ssl.SSLContext | None:
        """A server SSL context when TLS is configured."""
        if self.cert_file is None or self.key_file is None:
            return None
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(str(self.cert_file), str(self.key_file))
        return context

    def check(self, authorization: str | None) -> bool:
        """True when no users are configured or the Basic credentials match a bcrypt hash."""
        if not self.users:
            return True
        if not authorization or not authorization.startswith("Basic "):
            return False
        try:
            user, _, password = base64.b64decode(authorization[6:]).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return False
        hashed = self.users.get(user)
        if hashed is None:
            return False
        # bcrypt is slow by design: remember successes (keyed by a digest, never the password).
        key = hashlib.sha256(f"{user}\0{password}\0{hashed}".encode()).hexdigest()
        with self._lock:
            if key in self._ok_cache:
                return True
        import bcrypt  # lazily: not needed (nor installed everywhere) without basic auth

        try:
            ok = bool(bcrypt.checkpw(password.encode(), hashed.encode()))
        except ValueError:
            return False
        if ok:
            with self._lock:
                self._ok_cache.add(key)
        return ok


def _yaml_problem(path: str, exc: yaml.YAMLError) -> str:
    """`web.yml:2:14: invalid YAML (expected ',' or ']', but got ':')`."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else path
    return f"web config {where}: invalid YAML ({problem})"


def load_web_config(path: str | Path) -> WebConfig:
    """Read and validate a web config file; WebConfigError names what is wrong."""
    file = Path(path)
    try:
        raw: Any = yaml.safe_load(file.read_text()) or {}
    except OSError as exc:
        raise WebConfigError(f"cannot read web config {str(file)!r}: {exc}") from exc
    except yaml.YAMLError as exc:  # one line: where and what, never the file's text (it holds hashes)
        raise WebConfigError(_yaml_problem(str(file), exc)) from None
    if not isinstance(raw, dict):
        raise WebConfigError(f"web config {str(file)!r} must be a mapping")
    unknown = sorted(set(raw) - set(KNOWN_KEYS))
    if unknown:
        raise WebConfigError(f"unknown web config key {unknown[0]!r}; valid keys: {', '.join(KNOWN_KEYS)}")
    config = WebConfig()
    tls = raw.get("tls_server_config") or {}
    if tls:
        for key in ("cert_file", "key_file"):
            if not tls.get(key):
                raise WebConfigError(f"tls_server_config needs {key}")
        for key in ("cert_file", "key_file"):
            resolved = (file.parent / str(tls[key])).resolve()
            if not resolved.is_file():
                raise WebConfigError(f"tls_server_config {key} {str(resolved)!r} does not exist")
            setattr(config, key, resolved)
    users = raw.get("basic_auth_users") or {}
    for user, hashed in users.items():
        if not str(hashed).startswith(("$2a$", "$2b$", "$2y$")):
            raise WebConfigError(f"basic_auth_users {user!r}: not a bcrypt hash")
    config.users = {str(u): str(h) for u, h in users.items()}
    return config
