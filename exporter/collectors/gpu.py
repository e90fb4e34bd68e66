"""GPU collector: dcgm-exporter's default fields under its names, labels and units, plus what it lacks.

Beyond dcgm-exporter: `infergauge_gpu_clock_event_active{reason}`, `infergauge_gpu_process_memory_bytes`,
`infergauge_gpu_topology_info{gpu,peer,link}`, power/utilization peaks since the last scrape,
`infergauge_gpus` (0 on a host without an NVIDIA GPU: a fact, not a failure), and per GPU
`infergauge_gpu_up` (0 for a lost GPU: its series are dropped, not the others'),
`infergauge_gpu_read_success` (0 when its reading missed this scrape's deadline) and
`infergauge_gpu_read_age_seconds` (age of the values served: a hung GPU serves its last good ones).
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from prometheus_client.core import Metric

from exporter.checks import finding
from exporter.collectors.dcgm_fields import DCGM_FIELDS
from exporter.families import Families
from exporter.nvml.facts import gpu_manifest
from exporter.nvml.lanes import SYSTEM, TOPOLOGY, Job
from exporter.nvml.readers import CLOCK_EVENT_REASONS, GpuIdentity
from exporter.nvml.reading import DEFAULT_TIMEOUT_S, GpuReading, read_gpu
from exporter.nvml.sampler import GpuSampler
from exporter.nvml.session import NvmlSession, NvmlUnavailable, text, try_call
from exporter.nvml.topology import read_matrix
from exporter.procs import process_name

LOG = logging.getLogger(__name__)


class GpuCollector:
    """Reads every GPU in its own lane on each scrape; a lost or hung GPU costs only its own series."""

    name = "gpu"

    def __init__(
        self,
        session: NvmlSession,
        *,
        sampler: GpuSampler | None = None,
        hostname: str | None = None,
        name_of_pid: Callable[[int], str] = process_name,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        self.session = session
        self.sampler = sampler
        self.hostname = hostname or socket.gethostname()
        self.name_of_pid = name_of_pid
        self.timeout_s = timeout_s
        self._identities: dict[int, GpuIdentity] = {}
        self._last: dict[int, GpuReading] = {}
        self._late: dict[int, Job] = {}
        self._driver: str | None = None
        self._topology: list[list[str]] | None = None

    def scrape(self) -> tuple[list[Metric], bool]:
        """All GPUs' families; True when every GPU answered in time (or the host has no GPU)."""
        out = Families()
        try:
            nvml = self.session.get_within()
        except NvmlUnavailable:
            if not self.session.absent:
                raise
            self._emit_count(0, out)
            return out.metrics(), True
        count, driver = self.session.lanes.call(SYSTEM, "count", partial(self._system, nvml), self.timeout_s)
        self._emit_count(count, out)
        self._harvest_late()
        calls = {
            i: partial(read_gpu, nvml, i, driver, self._identities.get(i), slow=self._reads_slow(i))
            for i in range(count)
        }
        jobs = self.session.lanes.gather("scrape", calls, self.timeout_s)
        now = time.monotonic()
        all_ok, readings = True, {}
        for index, job in jobs.items():
            reading, up, fresh = self._settle(index, job)
            all_ok = all_ok and fresh
            self._emit_status(index, reading, up, fresh, now, out)
            if reading is not None:
                readings[index] = reading
                self._emit_gpu(reading, out)
        if all_ok and readings:
            all_ok = self._emit_topology(nvml, readings, out)
        return out.metrics(), all_ok

    def facts(self, known: Mapping[str, Any]) -> dict[str, Any]:
        """The manifest's `gpus` and `topology`, and a `gpu_unavailable` check when NVML is not read."""
        gpus, topology, error = gpu_manifest(self.session, self.timeout_s)
        for gpu in gpus:
            gpu["xid"] = self.sampler.last_xid(gpu["index"]) if self.sampler is not None else 0
        checks = [finding("gpu_unavailable", "warning" if not gpus else "error", error)] if error else []
        return {"gpus": gpus, "topology": topology, "checks": checks}

    def start(self) -> None:
        """Start the background sampler."""
        if self.sampler is not None:
            self.sampler.start()

    def tick(self) -> None:
        """One sampler pass now."""
        if self.sampler is not None:
            self.sampler.tick()

    def stop(self) -> None:
        """Stop the sampler, release NVML."""
        if self.sampler is not None:
            self.sampler.stop()
        self.session.shutdown()

    def _reads_slow(self, index: int) -> bool:
        """Whether the scrape reads the slow fields itself: only when no sampler has them or will."""
        if self.sampler is None:
            return True
        return not self.sampler.running and not self.sampler.has_slow(index)

    def _system(self, nvml: Any) -> tuple[int, str]:
        if self._driver is None:
            self._driver = text(try_call(nvml, "nvmlSystemGetDriverVersion") or "")
        return int(nvml.nvmlDeviceGetCount()), self._driver

    def _harvest_late(self) -> None:
        """A reading that answered after an earlier scrape's deadline becomes the last good one."""
        for index, job in list(self._late.items()):
            if job.done.is_set():
                del self._late[index]
                if job.error is None:
                    self._last[index] = job.value

    def _settle(self, index: int, job: Job) -> tuple[GpuReading | None, float, bool]:
        """(reading to serve, up, fresh) for one GPU's job."""
        if not job.done.is_set():  # hung or slow: serve the last good reading, if any
            self._late[index] = job
            last = self._last.get(index)
            return last, 1.0 if last is not None else 0.0, False
        if job.error is not None:  # DeviceLost or a handle that cannot be had: drop this GPU only
            LOG.debug("gpu %d read failed: %s", index, job.error)
            self._identities.pop(index, None)
            self._last.pop(index, None)
            return None, 0.0, False
        reading: GpuReading = job.value
        self._identities[index] = reading.identity
        self._last[index] = reading
        return reading, 1.0, True

    def _emit_status(
        self, index: int, reading: GpuReading | None, up: float, fresh: bool, now: float, out: Families
    ) -> None:
        """infergauge_gpu_up, _read_success and (when values are served) _read_age_seconds."""
        labels = {"gpu": str(index), "Hostname": self.hostname}
        out.add(
            "infergauge_gpu_up",
            "gauge",
            "1 while NVML reaches the GPU; 0 when it reports the GPU lost (its series are dropped).",
            labels,
            up,
        )
        out.add(
            "infergauge_gpu_read_success",
            "gauge",
            "1 when the GPU answered within the scrape's deadline; 0: its last good values are served.",
            labels,
            1.0 if fresh else 0.0,
        )
        if reading is not None:
            out.add(
                "infergauge_gpu_read_age_seconds",
                "gauge",
                "Age of the values served for this GPU (grows while the GPU does not answer).",
                labels,
                reading.age_s(now),
            )

    def _emit_count(self, count: int, out: Families) -> None:
        out.add(
            "infergauge_gpus",
            "gauge",
            "GPUs NVML reports on this host (0: no NVIDIA driver or library, a fact rather than a failure).",
            {"Hostname": self.hostname},
            float(count),
        )

    def _emit_gpu(self, reading: GpuReading, out: Families) -> None:
        identity = reading.identity
        labels = identity.labels(self.hostname)
        fields = dict(reading.fields)
        samples = self.sampler.snapshot(identity.index) if self.sampler else None
        if samples is not None:
            fields.update(samples.gpm)
            fields["DCGM_FI_DEV_XID_ERRORS"] = float(samples.last_xid)
            fields.update(samples.slow or {})
        for name, (typ, doc) in DCGM_FIELDS.items():
            if name in fields:
                out.add(name, typ, doc, labels, fields[name])
        labels = identity.own_labels(self.hostname)
        self._emit_peaks(fields, samples, labels, out)
        if "infergauge_power_limit_w" in fields:
            out.add(
                "infergauge_gpu_power_limit_watts",
                "gauge",
                "Enforced power limit (the cap power draw meets).",
                labels,
                fields["infergauge_power_limit_w"],
            )
        if "infergauge_max_sm_clock_mhz" in fields:
            out.add(
                "infergauge_gpu_sm_clock_max_hertz",
                "gauge",
                "Highest SM clock the GPU supports.",
                labels,
                fields["infergauge_max_sm_clock_mhz"] * 1e6,
            )
        self._emit_reasons(reading.clock_reasons, labels, out)
        for pid, used in reading.processes:
            if used is not None:
                out.add(
                    "infergauge_gpu_process_memory_bytes",
                    "gauge",
                    "GPU memory used by a process.",
                    {**labels, "pid": str(pid), "process": self.name_of_pid(pid)},
                    used,
                )

    @staticmethod
    def _emit_reasons(reasons: int | None, labels: dict[str, str], out: Families) -> None:
        if reasons is None:
            return
        for bit, reason in CLOCK_EVENT_REASONS.items():
            out.add(
                "infergauge_gpu_clock_event_active",
                "gauge",
                "1 while this clocks-event (throttle) reason is active.",
                {**labels, "reason": reason},
                1.0 if int(reasons) & bit else 0.0,
            )

    @staticmethod
    def _emit_peaks(fields: dict[str, float], samples: Any, labels: dict[str, str], out: Families) -> None:
        power = [v for v in (fields.get("DCGM_FI_DEV_POWER_USAGE"), samples and samples.power_peak_w) if v]
        util = [
            v
            for v in (fields.get("DCGM_FI_DEV_GPU_UTIL"), samples and samples.util_peak_percent)
            if v is not None
        ]
        if power:
            out.add(
                "infergauge_gpu_power_usage_peak_watts",
                "gauge",
                "Highest power draw sampled since the previous scrape.",
                labels,
                max(power),
            )
        if util:
            out.add(
                "infergauge_gpu_utilization_peak_ratio",
                "gauge",
                "Highest GPU utilization (0-1) sampled since the previous scrape.",
                labels,
                max(util) / 100.0,
            )

    def _emit_topology(self, nvml: Any, readings: dict[int, GpuReading], out: Families) -> bool:
        """The GPU-pair series (matrix read once, in its own lane); False when it did not answer."""
        indices = sorted(readings)
        if self._topology is None or len(self._topology) != len(indices):
            handles = [readings[i].handle for i in indices]
            bus_ids = [readings[i].identity.pci_bus_id for i in indices]
            read = partial(read_matrix, nvml, handles, bus_ids)
            try:
                self._topology = self.session.lanes.call(TOPOLOGY, "matrix", read, self.timeout_s)
            except Exception as exc:  # a pair call that hangs or fails: no topology this scrape
                LOG.debug("gpu topology not read: %s", exc)
                return False
        for row, gpu in enumerate(indices):
            for col, peer in enumerate(indices):
                if gpu != peer:
                    out.add(
                        "infergauge_gpu_topology_info",
                        "gauge",
                        "Path between two GPUs as nvidia-smi topo names it (NV<n>, PIX, PXB, PHB, NODE, SYS)",
                        {
                            "gpu": str(gpu),
                            "peer": str(peer),
                            "link": self._topology[row][col],
                            "Hostname": self.hostname,
                        },
                        1.0,
                    )
        return True
