"""Exporter scrape cost: latency (median, p99) of GET /metrics and exporter CPU per scrape.

Runs the real `infergauge-exporter` as a subprocess on loopback and, once its background sampler has
read every GPU, scrapes it N times, at most one scrape every 25 ms so the run spans sampler passes:
with 8 fake GPUs, with 8 fake GPUs of which one is hung (its NVML calls never return; target for
both: p99 < 50 ms), on the real GPUs when NVML is present, and prints the figure recorded on an
H200 (tests/fixtures/exporter/h200-bench.json) when there is one.

    python -m bench.exporter_scrape                 # fake 8 GPUs (+ real GPUs if any)
    python -m bench.exporter_scrape --gpus real --json out.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import psutil

REPO = Path(__file__).resolve().parents[1]
RECORDED = sorted((REPO / "tests" / "fixtures" / "exporter").glob("h200*-bench.json"))


def free_port() -> int:
    """A free TCP port on loopback."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_exporter(extra: list[str]) -> tuple[subprocess.Popen[bytes], str]:
    """Launch the exporter on a free loopback port; returns (process, base URL) once /healthz answers."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    cmd = [
        sys.executable,
        "-m",
        "exporter",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--no-discover",
        *extra,
    ]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{base}/healthz", timeout=1):
                return proc, base
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"exporter exited: {proc.stderr.read().decode() if proc.stderr else ''}"
                ) from None
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("exporter did not answer /healthz within 30 s")


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    ordered = sorted(values)
    rank = max(1, int(round(q / 100.0 * len(ordered) + 0.5 - 1e-9)))
    return ordered[min(rank, len(ordered)) - 1]


def warm_up(base: str, timeout_s: float = 30.0) -> None:
    """Scrape until the background sampler has read every GPU's slow fields (energy counter present
    wherever a temperature is), so the measurement sees the steady state, sampler passes included."""
    deadline = time.monotonic() + timeout_s
    for _ in range(10):  # caches, NVML handles, topology
        urllib.request.urlopen(f"{base}/metrics", timeout=10).read()
    while time.monotonic() < deadline:
        body = urllib.request.urlopen(f"{base}/metrics", timeout=10).read().decode()
        if body.count("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{") >= body.count("DCGM_FI_DEV_GPU_TEMP{"):
            return
        time.sleep(0.2)


def measure(base: str, pid: int, scrapes: int, pace_s: float = 0.025) -> dict[str, Any]:
    """Scrape `scrapes` times, one every `pace_s` at most (so the run spans several sampler passes);
    latency per scrape and the exporter's CPU seconds per scrape (sampler thread included)."""
    warm_up(base)
    proc = psutil.Process(pid)
    cpu_before = sum(proc.cpu_times()[:2])
    latencies = []
    body = b""
    for _ in range(scrapes):
        started = time.perf_counter()
        body = urllib.request.urlopen(f"{base}/metrics", timeout=10).read()
        latencies.append(time.perf_counter() - started)
        time.sleep(max(0.0, pace_s - latencies[-1]))
    cpu = sum(proc.cpu_times()[:2]) - cpu_before
    text = body.decode()
    gpu_ok = 'infergauge_collector_success{collector="gpu"} 1.0' in text
    late = [line for line in text.splitlines() if line.startswith("infergauge_gpu_read_success{")]
    return {
        "scrapes": scrapes,
        "median_ms": statistics.median(latencies) * 1e3,
        "p99_ms": percentile(latencies, 99) * 1e3,
        "max_ms": max(latencies) * 1e3,
        "cpu_ms_per_scrape": cpu / scrapes * 1e3,
        "bytes_per_scrape": len(body),
        "series": sum(1 for line in body.decode().splitlines() if line and not line.startswith("#")),
        "gpu_collector_ok": gpu_ok,
        "gpus_marked_late": sum(1 for line in late if line.endswith(" 0.0")),
    }


def run_case(label: str, extra: list[str], scrapes: int) -> dict[str, Any]:
    """Start an exporter with `extra` flags, measure, stop it."""
    proc, base = start_exporter(extra)
    try:
        result = {"case": label, **measure(base, proc.pid, scrapes)}
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    return result


def show(result: dict[str, Any]) -> None:
    """One line per case."""
    print(
        f"{result['case']:<24} scrapes={result['scrapes']} median={result['median_ms']:.2f} ms "
        f"p99={result['p99_ms']:.2f} ms cpu/scrape={result['cpu_ms_per_scrape']:.2f} ms "
        f"series={result['series']} gpu_ok={result['gpu_collector_ok']} "
        f"late={result.get('gpus_marked_late', '?')}",
        flush=True,
    )


def nvml_present() -> bool:
    """True when NVML initialises here (a real GPU and driver)."""
    try:
        import pynvml

        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
        return True
    except Exception:
        return False


def profile_nvml(rounds: int) -> None:
    """Time each NVML reading the GPU collector does, per GPU (real NVML only), to find slow calls."""
    import pynvml

    from exporter.nvml import readers as gpu_read
    from exporter.nvml.topology import read_matrix

    pynvml.nvmlInit()
    handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
    steps: dict[str, Any] = {fn.__name__: fn for fn in gpu_read.READERS}
    steps.update(
        {
            "clock_event_reasons": gpu_read.read_clock_event_reasons,
            "processes": gpu_read.read_processes,
            "slow_fields (sampled)": gpu_read.read_slow_fields,
        }
    )
    for name, fn in steps.items():
        started = time.perf_counter()
        for _ in range(rounds):
            for handle in handles:
                fn(pynvml, handle)
        per_gpu = (time.perf_counter() - started) / rounds / len(handles) * 1e3
        print(f"profile {name:<22} {per_gpu:8.3f} ms per GPU", flush=True)
    for fn_name, args in (
        ("nvmlDeviceGetFieldValues", [(82, 0)]),
        ("nvmlDeviceGetFieldValues", [(138, 0xFFFFFFFF)]),
        ("nvmlDeviceGetTotalEccErrors", [0, 0]),
        ("nvmlDeviceGetRemappedRows", []),
        ("nvmlDeviceGetComputeRunningProcesses", []),
        ("nvmlDeviceGetPowerUsage", []),
        ("nvmlDeviceGetTotalEnergyConsumption", []),
        ("nvmlDeviceGetPcieReplayCounter", []),
        ("nvmlDeviceGetMemoryInfo", [pynvml.nvmlMemory_v2]),
        ("nvmlDeviceGetUtilizationRates", []),
        ("nvmlDeviceGetEncoderUtilization", []),
        ("nvmlDeviceGetEnforcedPowerLimit", []),
    ):
        started = time.perf_counter()
        for _ in range(rounds):
            with contextlib.suppress(pynvml.NVMLError):
                getattr(pynvml, fn_name)(handles[0], *args)
        print(
            f"profile call {fn_name}{args[:1]} {(time.perf_counter() - started) / rounds * 1e3:8.3f} ms",
            flush=True,
        )
    started = time.perf_counter()
    read_matrix(
        pynvml, handles, [gpu_read.read_identity(pynvml, h, i, "").pci_bus_id for i, h in enumerate(handles)]
    )
    print(
        f"profile topology matrix (once, cached) {(time.perf_counter() - started) * 1e3:8.3f} ms", flush=True
    )
    pynvml.nvmlShutdown()


def main(argv: list[str] | None = None) -> None:
    """Print the scrape figures (see module docstring)."""
    parser = argparse.ArgumentParser(prog="bench.exporter_scrape")
    parser.add_argument("--gpus", choices=["fake", "real", "both"], default="both")
    parser.add_argument("--scrapes", type=int, default=200)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--profile", action="store_true", help="time each NVML reading per GPU, then exit")
    args = parser.parse_args(argv if argv is not None else [])
    if args.profile:
        profile_nvml(20)
        return
    results = []
    if args.gpus in ("fake", "both"):
        results.append(run_case("fake 8 GPUs", ["--fake-gpus", "8"], args.scrapes))
        show(results[-1])
        hung = ["--fake-gpus", "8", "--fake-hung-gpu", "3"]
        results.append(run_case("fake 8 GPUs, 1 hung", hung, args.scrapes))
        show(results[-1])
    if args.gpus in ("real", "both") and nvml_present():
        results.append(run_case("real GPUs (NVML)", [], args.scrapes))
        show(results[-1])
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    for path in RECORDED:
        recorded = json.loads(path.read_text())
        note = f" [{recorded['note']}]" if recorded.get("note") else ""
        for item in recorded.get("results", []):
            print(
                f"recorded on {recorded.get('device', 'H200')} ({recorded.get('date', '?')}){note}:", end=" "
            )
            show(item)
    if any(r["case"].startswith("fake") and r["p99_ms"] >= 50 for r in results):
        print("WARNING: p99 scrape latency with 8 fake GPUs (one hung or none) is above 50 ms", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
