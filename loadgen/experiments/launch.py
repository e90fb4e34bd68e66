"""Engines an experiment starts itself: launch a command, wait until healthy, stop it.

`{port}` in the command and base URL becomes a free loopback port; `python -m simengine` runs with
this interpreter (other engines run as written: give the path of their own environment's python,
as the seed recommends one isolated environment per engine). Parameter variants
are appended as the engine's own flags (infergauge/engines/params.py). Output goes to a log file.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from infergauge import engines
from infergauge.engines.params import to_cmdline
from infergauge.redact import redact_argv
from loadgen.experiments.plantypes import EngineSpec
from loadgen.experiments.startup import read_probe, slow_phase

POLL_S = 0.2
STOP_GRACE_S = 10.0  # for the launcher to stop its own children (SGLang's scheduler) cleanly
GROUP_GRACE_S = 5.0


class EngineFailed(RuntimeError):
    """A launched engine exited or never became healthy; the message says which and where its log is."""


def free_port() -> int:
    """A currently free TCP port on 127.0.0.1 (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def launch_argv(spec: EngineSpec, params: dict[str, Any], port: int) -> list[str]:
    """The command to run: `{port}` filled, python resolved, variant params appended as flags."""
    argv = [token.replace("{port}", str(port)) for token in spec.command]
    if argv[:1] in (["python"], ["python3"]) and spec.family == "simengine":
        argv[0] = sys.executable  # our own simulator lives in this environment
    if spec.family is not None:
        argv += to_cmdline(engines.get(spec.family), params)
    return argv


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2.0) as resp:  # noqa: S310 - loopback URL from the plan
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError, ValueError):
        return False


class LaunchedEngine:
    """One engine process; `start()` returns its base URL once `health_path` answers 200."""

    def __init__(
        self, spec: EngineSpec, params: dict[str, Any], log_path: Path, api_key: str | None = None
    ) -> None:
        self.spec, self.params, self.log_path = spec, params, log_path
        self.api_key = api_key  # the runs' bearer token: the readiness probe's /v1/models needs it too
        self.proc: subprocess.Popen[bytes] | None = None
        self.base_url = ""
        self.argv: list[str] = []

    def start(self) -> str:
        """Launch and wait for health; raises EngineFailed (after stopping it) when it never gets there."""
        port = free_port()
        self.argv = launch_argv(self.spec, self.params, port)
        template = self.spec.base_url or "http://127.0.0.1:{port}"
        self.base_url = template.replace("{port}", str(port)).rstrip("/")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            log.write(f"\n# {stamp} {redact_argv(self.argv)}\n".encode())
            try:
                self.proc = subprocess.Popen(
                    self.argv,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env={**os.environ, **self.spec.env},
                    start_new_session=True,
                )
            except OSError as exc:
                raise EngineFailed(
                    f"cannot start engine {self.spec.name!r}: {exc.strerror}: {self.argv[0]!r}"
                ) from None
        self._wait_healthy()
        return self.base_url

    def _wait_healthy(self) -> None:
        """Poll until ready (listening, health 200, a model listed); the timeout names the slow phase."""
        assert self.proc is not None
        path, timeout_s = self.spec.health_path, self.spec.health_timeout_s
        deadline = time.monotonic() + timeout_s
        phase: str | None = "process not started"
        while time.monotonic() < deadline:
            code = self.proc.poll()
            if code is not None:
                raise EngineFailed(
                    f"engine {self.spec.name!r} exited with code {code} at start "
                    f"({exited_phase(phase)}){_last_line(self.log_path)}; see {self.log_path}"
                )
            phase = slow_phase(read_probe(self.base_url, path, self.api_key), path)
            if phase is None:
                return
            time.sleep(POLL_S)
        self.stop()
        raise EngineFailed(
            f"engine {self.spec.name!r} not healthy at {self.base_url}{path} after {timeout_s:g} s "
            f"(health_timeout_s): {phase}; see {self.log_path}"
        )

    def check(self) -> str | None:
        """None while the engine runs and answers its health path; else what is wrong with it."""
        if self.proc is None:
            return f"engine {self.spec.name!r} is not running"
        code = self.proc.poll()
        if code is not None:
            name = self.spec.name
            return f"engine {name!r} exited with code {code} since its last run; see {self.log_path}"
        url = self.base_url + self.spec.health_path
        if not _healthy(url):
            return f"engine {self.spec.name!r} no longer answers 200 at {url}; see {self.log_path}"
        return None

    def stop(self) -> None:
        """SIGTERM the launcher process alone (it shuts its own children down), then after a grace
        period SIGTERM its process group, then SIGKILL what is left of the group."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            _wait_exit(proc, STOP_GRACE_S)
        for sig, wait_s in ((signal.SIGTERM, GROUP_GRACE_S), (signal.SIGKILL, 5.0)):
            if not _group_alive(proc.pid):
                break
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, sig)
            _wait_group(proc, wait_s)
        proc.poll()  # reap the launcher


def _wait_exit(proc: subprocess.Popen[bytes], wait_s: float) -> None:
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=wait_s)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _wait_group(proc: subprocess.Popen[bytes], wait_s: float) -> None:
    """Until nothing of the group is left (the launcher reaped, its children gone) or `wait_s`."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        proc.poll()  # a zombie launcher keeps the group alive until reaped
        if not _group_alive(proc.pid):
            return
        time.sleep(0.05)


def exited_phase(phase: str | None) -> str:
    """How far an engine that exited got: the last phase seen, without the `process alive` it no longer is."""
    if phase is None or phase == "process not started" or phase.startswith("process alive"):
        return "its port never listened"
    return f"last seen: {phase}"


def _last_line(log_path: Path) -> str:
    """`: <last non-empty line of the engine's log>` (cut to 200 characters), or nothing."""
    try:
        text = log_path.read_text(errors="replace")
        lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("# ")]
    except OSError:
        return ""
    return f": {' '.join(redact_argv(lines[-1].split()))[:200]}" if lines else ""  # argv echoed: no secret
