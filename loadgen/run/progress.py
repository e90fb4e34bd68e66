"""Live progress (rich on a terminal, plain lines otherwise) and the final summary table."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

from loadgen.workload.fidelity import traffic_lines

if TYPE_CHECKING:  # rich is imported only where a terminal shows the live line (not by a quiet run)
    from rich.live import Live

PLAIN_EVERY_S = 5.0


@dataclass
class Counts:
    """What the progress line shows."""

    done: int = 0
    total: int | None = None
    in_flight: int = 0
    errors: int = 0


class Progress:
    """Prints progress while the run goes; `update()` is cheap and called about once a second."""

    def __init__(self, enabled: bool, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = enabled and self.stream.isatty()
        self.started = time.monotonic()
        self._last_plain = self.started  # the first plain line after PLAIN_EVERY_S: a run that fails at
        # once (an engine that refuses) ends on its one-line error, with no progress line before it
        self._live: Live | None = None
        if self.tty:
            from rich.console import Console
            from rich.live import Live
            from rich.text import Text

            self._live = Live(
                Text(""), console=Console(file=self.stream), refresh_per_second=4, transient=True
            )
            self._live.start()

    def line(self, c: Counts) -> str:
        """One progress line: done/total, req/s, in flight, errors, elapsed."""
        elapsed = time.monotonic() - self.started
        total = "?" if c.total is None else str(c.total)
        rate = c.done / elapsed if elapsed > 0 else 0.0
        return (
            f"done {c.done}/{total}  {rate:.1f} req/s  in flight {c.in_flight}  "
            f"errors {c.errors}  elapsed {elapsed:.0f}s"
        )

    def update(self, c: Counts) -> None:
        """Refresh the display (plain mode prints every 5 s, the first 5 s in)."""
        if not self.enabled:
            return
        if self._live is not None:
            from rich.text import Text

            self._live.update(Text(self.line(c)))
            return
        now = time.monotonic()
        if now - self._last_plain >= PLAIN_EVERY_S:
            self._last_plain = now
            print(self.line(c), file=self.stream, flush=True)

    def close(self) -> None:
        """Stop the live display."""
        if self._live is not None:
            self._live.stop()
            self._live = None


def _ms(value: Any) -> str:
    return "n/a" if value is None else f"{value * 1000:.2f}"


def _section(title: str, width: int = 50, fill: str = "-") -> str:
    return f" {title} ".center(width, fill) if title else fill * width


def summary_table(s: dict[str, Any]) -> str:
    """The summary in `vllm bench serve`'s layout, plus schedule lag, goodput and outcomes."""
    req = s["requests"]
    rows: list[str] = [_section("Serving Benchmark Result", fill="=")]

    def row(label: str, value: Any) -> None:
        rows.append(f"{label:<40} {value:<10}")

    row("Successful requests:", req["ok"])
    row("Failed requests:", req["failed"])
    if req["failed"]:
        row(
            "  by outcome:",
            ", ".join(f"{k}={v}" for k, v in req["by_outcome"].items() if v and k != "cancelled"),
        )
    if req.get("cancelled"):
        row("Cancelled by loadgen (not failures):", req["cancelled"])
    if s.get("max_concurrency"):
        row("Maximum request concurrency:", s["max_concurrency"])
    row("Request rate configured (RPS):", s.get("asked_rate"))
    row("Benchmark duration (s):", f"{s['duration_s']:.2f}")
    row("Total input tokens:", s["total_input_tokens"])
    row(f"Total generated tokens ({s['token_count']}):", s["total_output_tokens"])
    for label, key in (
        ("Mean prompt tokens per request:", "mean_prompt_tokens"),
        ("Mean output tokens per request:", "mean_output_tokens"),
    ):
        if s.get(key) is not None:
            row(label, f"{s[key]:.1f}")
    row("Request throughput (req/s):", f"{s['request_throughput']:.2f}")
    if s.get("goodput") is not None:
        row("Request goodput (req/s):", f"{s['goodput']:.2f}")
    row("Output token throughput (tok/s):", f"{s['output_token_throughput']:.2f}")
    row("Total Token throughput (tok/s):", f"{s['total_token_throughput']:.2f}")
    for key, title, short in (
        ("ttft_s", "Time to First Token", "TTFT"),
        ("tpot_s", "Time per Output Token (excl. 1st token)", "TPOT"),
        ("itl_s", "Inter-token Latency", "ITL"),
        ("e2e_s", "End-to-end Latency", "E2EL"),
        ("schedule_lag_s", "Schedule Lag (client lateness: send - due)", "lag"),
        ("slot_wait_s", "Slot Wait (for --max-concurrency)", "wait"),
    ):
        d = s.get(key)
        if d is None:
            continue
        rows.append(_section(title))
        row(f"Mean {short} (ms):", _ms(d["mean"]))
        row(f"Median {short} (ms):", _ms(d["p50"]))
        row(f"P90 {short} (ms):", _ms(d["p90"]))
        row(f"P99 {short} (ms):", _ms(d["p99"]))
    rows += cache_rows(s.get("cache") or {})
    rows += cpu_rows(s.get("client_cpu") or {})
    rows.append(_section("", fill="="))
    rows.extend(traffic_lines(s))  # a trace's schedule fidelity, sessions' TTFT by turn
    if (sat := s.get("client_saturated") or {}).get("saturated"):
        rows.append(saturation_line(sat))
    if s.get("partial"):
        rows.append(f"PARTIAL RESULT: {s.get('partial_reason')}")
    return "\n".join(rows)


def _pct(value: Any) -> str:
    return "-" if value is None else f"{value:.1%}"


def cache_rows(cache: dict[str, Any]) -> list[str]:
    """The prefix-cache hit ratios (docs/prefix-cache.md): reported, engine counters, implied bound;
    nothing when the run has none of them."""
    reported, implied = cache.get("reported") or {}, cache.get("implied") or {}
    if all(x.get("hit_ratio") is None for x in (cache, reported, implied)):
        return []
    with_details = reported.get("requests_with_details") or 0
    block = f"{implied.get('block_size')}-token blocks" if implied.get("hit_ratio") is not None else "none"
    lines = [
        (f"Reported per request ({with_details} with details):", _pct(reported.get("hit_ratio"))),
        ("Engine cache counters (over the run):", _pct(cache.get("hit_ratio"))),
        (f"Implied bound ({block}):", _pct(implied.get("hit_ratio"))),
    ]
    return _titled("Prefix Cache Hit Ratio", lines)


def cpu_rows(cpu: dict[str, Any]) -> list[str]:
    """What the load cost loadgen itself (summary `client_cpu`); nothing for a run without it."""
    if cpu.get("load_s") is None:
        return []
    per = cpu.get("load_ms_per_request")
    cores = cpu.get("load_cores")
    lines = [
        ("CPU over the load (s):", f"{cpu['load_s']:.2f}"),
        ("CPU per request (ms):", "-" if per is None else f"{per:.3f}"),
        ("Cores kept busy over the load:", "-" if cores is None else f"{cores:.2f}"),
    ]
    if cpu.get("embedded_engine_s") is not None:  # --target sim: the engine's thread, left out above
        lines.append(("Embedded engine's CPU, left out (s):", f"{cpu['embedded_engine_s']:.2f}"))
    return _titled("Client Cost (loadgen's own CPU)", lines)


def _titled(title: str, lines: list[tuple[str, str]]) -> list[str]:
    """A titled section of (label, value) rows in the summary's layout."""
    return [_section(title), *(f"{label:<40} {value:<10}" for label, value in lines)]


def saturation_line(sat: dict[str, Any]) -> str:
    """The console's warning that loadgen's own core set the pace (summary `client_saturated`)."""
    return (
        f"CLIENT SATURATED for {sat['saturated_s']:.1f} s: unparsed backlog peaked at "
        f"{sat['peak_backlog_requests']} requests / {sat['peak_backlog_mb']:.0f} MB "
        f"(bound {sat['bound_requests']} / {sat['bound_mb']:.0f} MB); loadgen's core, not the server, "
        "limited throughput while it lasted"
    )
