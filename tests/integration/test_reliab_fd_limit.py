"""Issue 22 item 15 (file descriptors): the embedded simulated engine (and loadgen) lift the soft
open-files limit to the hard one at start, and when the limit binds anyway the engine says so once,
in one line naming the limit, instead of an `Errno 24` traceback per refused connection."""

from __future__ import annotations

import resource
import socket
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.timeout(90)

SERVE = """
import resource, sys
from simengine.embedded import EmbeddedEngine
engine = EmbeddedEngine([]).start()
print(engine.base_url, *resource.getrlimit(resource.RLIMIT_NOFILE), flush=True)
sys.stdin.read()
engine.stop()
"""


def _engine_with_limit(soft: int, hard: int) -> subprocess.Popen[str]:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    return subprocess.Popen(
        [sys.executable, "-c", SERVE],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=limit,
    )


def test_embedded_engine_raises_the_soft_open_files_limit_to_the_hard_one() -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard <= 256:
        pytest.skip(f"needs a finite hard open-files limit above 256 (have {hard})")
    proc = _engine_with_limit(256, hard)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
    finally:
        proc.communicate("", timeout=60)
    _, soft_now, hard_now = line.split()
    assert (int(soft_now), int(hard_now)) == (hard, hard)


def test_the_engine_says_once_when_the_open_files_limit_binds() -> None:
    proc = _engine_with_limit(64, 64)
    sockets: list[socket.socket] = []
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        host, port = line.split()[0].rsplit("/", 1)[-1].rsplit(":", 1)
        for _ in range(150):  # more connections than the engine has descriptors
            sock = socket.create_connection((host, int(port)), timeout=5)
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            sockets.append(sock)
        time.sleep(1.0)  # the engine's accept loop meets EMFILE
    finally:
        for sock in sockets:
            sock.close()
        _, err = proc.communicate("", timeout=60)
    assert err.count("ran out of file descriptors (open-files limit 64, hard limit 64)") == 1, err
    assert "Traceback" not in err
