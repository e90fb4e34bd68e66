"""Process names and command lines from /proc (through psutil), for GPU processes and engine discovery."""

from __future__ import annotations

import psutil


def process_name(pid: int) -> str:
    """A short name for a pid: its title (e.g. `VLLM::EngineCore`) or executable; 'unknown' if hidden."""
    try:
        proc = psutil.Process(pid)
        cmdline = proc.cmdline()
        if len(cmdline) == 1 and " " not in cmdline[0]:
            return cmdline[0][:64]  # a retitled process (setproctitle) keeps only its title
        return proc.name()[:64]
    except (psutil.Error, OSError):
        return "unknown"  # e.g. a process of another PID namespace (container without hostPID)
