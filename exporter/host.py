"""Host facts for the manifest and `infergauge_host_info`: hostname, CPU, memory, OS, kernel, Python."""

from __future__ import annotations

import os
import platform
import socket
from pathlib import Path
from typing import Any

import psutil


def _read_or_empty(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def cpu_model(cpuinfo: str | None = None) -> str:
    """The CPU's model name from /proc/cpuinfo (platform.processor() elsewhere)."""
    if cpuinfo is None:
        cpuinfo = _read_or_empty("/proc/cpuinfo")
    for line in cpuinfo.splitlines():
        if line.lower().startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def os_name(os_release: str | None = None) -> str:
    """PRETTY_NAME from /etc/os-release, else platform.platform()."""
    if os_release is None:
        os_release = _read_or_empty("/etc/os-release")
    for line in os_release.splitlines():
        if line.startswith("PRETTY_NAME="):
            return line.split("=", 1)[1].strip().strip('"')
    return platform.platform()


def host_facts() -> dict[str, Any]:
    """The manifest's `host` object."""
    return {
        "hostname": socket.gethostname(),
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count() or 0,
        "memory_bytes": int(psutil.virtual_memory().total),
        "os": os_name(),
        "kernel": platform.release(),
        "python": platform.python_version(),
    }
