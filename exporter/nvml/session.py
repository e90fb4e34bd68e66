"""Loading NVML (nvidia-ml-py's `pynvml`) and calling it field by field without failing a scrape.

Everything NVML-facing takes the module as an argument (`nvml`), so tests inject a fake
(`exporter.nvml.fake.FakeNvml`) and nothing touches the driver at import time.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from exporter.nvml.lanes import SYSTEM, Lanes

LOG = logging.getLogger(__name__)
T = TypeVar("T")

# NVML return codes (same values as pynvml's NVML_ERROR_*), kept here so error triage needs no driver.
ERROR_NOT_SUPPORTED = 3
ERROR_NO_PERMISSION = 4
ERROR_NOT_FOUND = 6
ERROR_DRIVER_NOT_LOADED = 9
ERROR_LIBRARY_NOT_FOUND = 12
ERROR_FUNCTION_NOT_FOUND = 13
ERROR_GPU_IS_LOST = 15
ERROR_RESET_REQUIRED = 16
ERROR_ARGUMENT_VERSION_MISMATCH = 25
# A device answering with one of these is gone: its series are dropped, the other GPUs' kept.
DEVICE_FATAL = frozenset({ERROR_GPU_IS_LOST, ERROR_RESET_REQUIRED})
# nvmlInit failing with one of these means this host has no NVIDIA GPU to read: a fact, not a fault.
NO_GPU_HERE = frozenset({ERROR_DRIVER_NOT_LOADED, ERROR_LIBRARY_NOT_FOUND})
# nvmlInit may take seconds on a host with many GPUs and persistence mode off; beyond this it hangs.
INIT_TIMEOUT_S = 10.0


class NvmlUnavailable(RuntimeError):
    """NVML could not be loaded or initialised (no driver, no GPU, no library)."""


class DeviceLost(RuntimeError):
    """One GPU stopped answering (lost, needs reset); only its series are dropped."""


def load_nvml() -> Any:
    """Import nvidia-ml-py's `pynvml` module (does not initialise it)."""
    try:
        import pynvml
    except ImportError as exc:  # pragma: no cover - the dependency is declared
        raise NvmlUnavailable(f"nvidia-ml-py is not installed: {exc}") from exc
    return pynvml


def error_code(exc: BaseException) -> int | None:
    """The NVML return code carried by an NVMLError, else None."""
    value = getattr(exc, "value", None)
    return value if isinstance(value, int) else None


def text(value: Any) -> str:
    """NVML strings are bytes in older bindings and str in newer ones."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def try_call(
    nvml: Any, fn_name: str, *args: Any, convert: Callable[[Any], T] | None = None
) -> T | Any | None:
    """Call `nvml.<fn_name>(*args)`; None when the function is missing, deprecated or unsupported.

    Raises DeviceLost when NVML reports the GPU gone, so the caller drops that GPU.
    """
    fn = getattr(nvml, fn_name, None)
    if fn is None:
        return None
    try:
        value = fn(*args)
    except Exception as exc:  # NVMLError (not supported, no permission, ...) or a binding mismatch
        code = error_code(exc)
        if code in DEVICE_FATAL:
            raise DeviceLost(f"{fn_name}: NVML error {code}") from exc
        return None
    return convert(value) if convert is not None else value


def first_supported(nvml: Any, calls: list[tuple[str, tuple[Any, ...]]]) -> Any | None:
    """The first of several alternative calls (newest API first) that answers, else None."""
    for fn_name, args in calls:
        value = try_call(nvml, fn_name, *args)
        if value is not None:
            return value
    return None


class NvmlSession:
    """Initialises NVML once per process (thread-safe); remembers why it failed and whether that
    means "no GPU here" (no library, no driver) or a fault; owns the lanes every NVML call runs on."""

    def __init__(self, nvml: Any | None = None, loader: Callable[[], Any] = load_nvml) -> None:
        self._nvml = nvml
        self._loader = loader
        self._lock = threading.Lock()
        # One thread per GPU (lanes.py): a hung call stalls its own GPU, never a whole scrape.
        self.lanes = Lanes()
        self._ready = False
        self.error: str | None = None
        self.absent = False  # True when the last failure means this host has no NVIDIA GPU

    def get(self) -> Any:
        """The initialised module; raises NvmlUnavailable (and retries on the next call)."""
        with self._lock:
            if self._ready:
                return self._nvml
            try:
                if self._nvml is None:
                    self._nvml = self._loader()
                self._nvml.nvmlInit()
            except Exception as exc:
                self.error = f"NVML unavailable: {exc}"
                self.absent = isinstance(exc, NvmlUnavailable) or error_code(exc) in NO_GPU_HERE
                raise NvmlUnavailable(self.error) from exc
            self._ready = True
            self.error = None
            self.absent = False
            return self._nvml

    def get_within(self, timeout_s: float = INIT_TIMEOUT_S) -> Any:
        """get(), in the system lane: NvmlUnavailable, or CallTimeout when nvmlInit hangs."""
        return self.lanes.call(SYSTEM, "init", self.get, timeout_s)

    def shutdown(self) -> None:
        """Release NVML if it was initialised; let idle lanes end."""
        self.lanes.close()
        with self._lock:
            if self._ready and self._nvml is not None:
                try:
                    self._nvml.nvmlShutdown()
                except Exception as exc:  # shutting down: nothing left to protect
                    LOG.debug("nvmlShutdown failed: %s", exc)
                self._ready = False
