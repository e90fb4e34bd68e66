"""Background sampler: power/utilization peaks between scrapes, GPM ratios (Hopper+) and XID events.

`tick()` does one sampling pass and is what tests call; `start()` runs it every `interval_s` in a
daemon thread. A scrape reads `snapshot(index)`, which also resets the peaks (peak since last scrape).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from exporter.nvml.lanes import EVENTS, SYSTEM, CallTimeout
from exporter.nvml.readers import read_slow_fields
from exporter.nvml.reading import DEFAULT_TIMEOUT_S
from exporter.nvml.session import NvmlSession, NvmlUnavailable, text, try_call

LOG = logging.getLogger(__name__)
# DCGM profiling field <- NVML GPM metric id (percent 0-100 in NVML, ratio 0-1 in DCGM).
GPM_METRICS: dict[str, int] = {
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE": 1,  # NVML_GPM_METRIC_GRAPHICS_UTIL
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": 5,  # NVML_GPM_METRIC_ANY_TENSOR_UTIL
    "DCGM_FI_PROF_DRAM_ACTIVE": 10,  # NVML_GPM_METRIC_DRAM_BW_UTIL
}
XID_EVENT = 0x8  # nvmlEventTypeXidCriticalError


@dataclass
class GpuSamples:
    """What the sampler knows about one GPU between two scrapes."""

    power_peak_w: float | None = None
    util_peak_percent: float | None = None
    gpm: dict[str, float] = field(default_factory=dict)
    last_xid: int = 0
    slow: dict[str, float] | None = None  # readers.read_slow_fields; None until first read
    gpm_supported: bool | None = None
    gpm_prev: Any = None
    slow_read_at: float = 0.0


class GpuSampler:
    """Samples every GPU each `interval_s` seconds; never raises out of the thread."""

    def __init__(
        self,
        session: NvmlSession,
        interval_s: float = 1.0,
        slow_every_s: float = 5.0,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        self.session = session
        self.timeout_s = timeout_s
        self.interval_s = interval_s
        self.slow_every_s = slow_every_s
        self._lock = threading.Lock()
        self._gpus: dict[int, GpuSamples] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._events: Any = None
        self._event_uuids: dict[str, int] = {}
        self._slow_cursor = 0

    @property
    def running(self) -> bool:
        """True while the background thread samples (then scrapes never read slow fields themselves)."""
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Run tick() in a daemon thread until stop()."""
        if self._thread is None and self.interval_s > 0:
            self._thread = threading.Thread(target=self._run, name="gpu-sampler", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        """Stop the thread (waits at most one interval)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.interval_s + 1)
            self._thread = None

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.tick()
            except Exception as exc:  # the sampler must outlive any NVML hiccup
                LOG.debug("gpu sampler tick failed: %s", exc)

    def tick(self) -> None:
        """One pass over all GPUs, each in its own lane under one deadline: peaks, GPM ratios, XIDs."""
        try:
            nvml = self.session.get_within()
            count = self.session.lanes.call(SYSTEM, "sample-count", nvml.nvmlDeviceGetCount, self.timeout_s)
            if self._events is None:
                self._events = self.session.lanes.call(
                    EVENTS, "create", partial(_event_set, nvml), self.timeout_s
                )
        except (NvmlUnavailable, CallTimeout) as exc:
            LOG.debug("gpu sampler pass skipped: %s", exc)
            return
        count = int(count)
        # Slow fields (~17 ms per H200) for one GPU per tick, round robin: a scrape then meets at
        # most one GPU's slow read in progress, however many GPUs there are.
        slow_gpu = self._slow_cursor % count if count else -1
        self._slow_cursor += 1
        calls = {i: partial(self._sample_index, nvml, i, slow=i == slow_gpu) for i in range(count)}
        for index, job in self.session.lanes.gather("sample", calls, self.timeout_s).items():
            if job.error is not None or not job.done.is_set():
                LOG.debug("gpu %d sample failed or late: %s", index, job.error)
        try:
            self.session.lanes.call(EVENTS, "drain", partial(self._drain_xid, nvml), self.timeout_s)
        except Exception as exc:  # the event wait hung or failed: XIDs are read on a later pass
            LOG.debug("xid drain failed: %s", exc)

    def _sample_index(self, nvml: Any, index: int, *, slow: bool) -> None:
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        if self._events and index not in self._event_uuids.values():
            try_call(nvml, "nvmlDeviceRegisterEvents", handle, XID_EVENT, self._events)
            self._event_uuids[text(try_call(nvml, "nvmlDeviceGetUUID", handle) or "")] = index
        self._sample_one(nvml, index, handle, slow=slow)

    def _sample_one(self, nvml: Any, index: int, handle: Any, *, slow: bool = True) -> None:
        power_mw = try_call(nvml, "nvmlDeviceGetPowerUsage", handle)
        rates = try_call(nvml, "nvmlDeviceGetUtilizationRates", handle)
        with self._lock:
            state = self._gpus.setdefault(index, GpuSamples())
            if power_mw is not None:
                state.power_peak_w = max(state.power_peak_w or 0.0, power_mw / 1000.0)
            if rates is not None:
                state.util_peak_percent = max(state.util_peak_percent or 0.0, float(rates.gpu))
        self._sample_gpm(nvml, handle, state)
        now = time.monotonic()
        if slow and (state.slow is None or now - state.slow_read_at >= self.slow_every_s):
            fields = read_slow_fields(nvml, handle)
            with self._lock:
                state.slow, state.slow_read_at = fields, now

    def _sample_gpm(self, nvml: Any, handle: Any, state: GpuSamples) -> None:
        if state.gpm_supported is None:
            support = try_call(nvml, "nvmlGpmQueryDeviceSupport", handle)
            state.gpm_supported = bool(getattr(support, "isSupportedDevice", 0))
        if not state.gpm_supported:
            return
        sample = try_call(nvml, "nvmlGpmSampleAlloc")
        if sample is None:
            return
        if try_call(nvml, "nvmlGpmSampleGet", handle, sample) is None:
            try_call(nvml, "nvmlGpmSampleFree", sample)  # never leak a sample per tick
            return
        previous, state.gpm_prev = state.gpm_prev, sample
        if previous is None:
            return
        ratios = gpm_ratios(nvml, previous, sample)
        try_call(nvml, "nvmlGpmSampleFree", previous)
        with self._lock:
            state.gpm = ratios

    def _drain_xid(self, nvml: Any) -> None:
        if not self._events:
            return
        for _ in range(64):  # bounded: never spin on a flood of events
            data = try_call(nvml, "nvmlEventSetWait", self._events, 0)
            if data is None:
                return
            uuid = text(try_call(nvml, "nvmlDeviceGetUUID", data.device) or "")
            event_gpu = self._event_uuids.get(uuid)
            if event_gpu is not None:
                with self._lock:
                    self._gpus.setdefault(event_gpu, GpuSamples()).last_xid = int(data.eventData)

    def has_slow(self, index: int) -> bool:
        """True once this GPU's slow fields have been sampled."""
        with self._lock:
            state = self._gpus.get(index)
            return state is not None and state.slow is not None

    def last_xid(self, index: int) -> int:
        """The last XID event seen on this GPU (0 = none), without touching the peaks."""
        with self._lock:
            return self._gpus.get(index, GpuSamples()).last_xid

    def snapshot(self, index: int) -> GpuSamples:
        """Copy of one GPU's samples; resets its peaks so the next scrape sees the next window."""
        with self._lock:
            state = self._gpus.setdefault(index, GpuSamples())
            copy = GpuSamples(
                state.power_peak_w,
                state.util_peak_percent,
                dict(state.gpm),
                state.last_xid,
                dict(state.slow) if state.slow is not None else None,
            )
            state.power_peak_w = None
            state.util_peak_percent = None
            return copy


def _event_set(nvml: Any) -> Any:
    """An XID event set, or False when NVML has none (then XIDs stay 0)."""
    return try_call(nvml, "nvmlEventSetCreate") or False


def gpm_ratios(nvml: Any, sample1: Any, sample2: Any) -> dict[str, float]:
    """DCGM_FI_PROF_* ratios (0-1) between two GPM samples."""
    request = nvml.c_nvmlGpmMetricsGet_t()
    request.version = getattr(nvml, "NVML_GPM_METRICS_GET_VERSION", 1)
    request.numMetrics = len(GPM_METRICS)
    request.sample1 = sample1
    request.sample2 = sample2
    for slot, metric_id in enumerate(GPM_METRICS.values()):
        request.metrics[slot].metricId = metric_id
    if try_call(nvml, "nvmlGpmMetricsGet", request) is None:
        return {}
    out: dict[str, float] = {}
    for slot, name in enumerate(GPM_METRICS):
        metric = request.metrics[slot]
        if metric.nvmlReturn == 0:
            out[name] = max(0.0, min(1.0, float(metric.value) / 100.0))
    return out
