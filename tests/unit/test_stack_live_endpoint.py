"""loadgen's live /metrics endpoint: where it listens, and the scrape of the run's end it waits for."""

from __future__ import annotations

import threading
import time
import urllib.request

import pytest

from loadgen.run import metrics_http
from loadgen.run.live_metrics import DEFAULT_LISTEN_ADDRESS, LiveMetrics, RunLabels

LABELS = {"run_id": "r1", "target": "sim", "model": "m", "scenario": "s"}
END_TS = 1_795_000_000.0
GAP_S = 0.2  # between the test's scrapes
NO_WAIT_S = 1.0  # a stop that waited took at least 2 * GAP_S + 1 s


def _metrics(addr: str = "127.0.0.1") -> tuple[LiveMetrics, str]:
    metrics = LiveMetrics(RunLabels(**LABELS), {})
    port = metrics.serve(0, addr)
    return metrics, f"http://127.0.0.1:{port}/metrics"


def _scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return str(resp.read().decode())


def _end_line(body: str) -> str:
    return next(line for line in body.splitlines() if line.startswith("loadgen_run_end_timestamp_seconds{"))


def _scrape_twice(url: str) -> None:
    _scrape(url)
    time.sleep(GAP_S)
    _scrape(url)


@pytest.mark.parametrize("addr", ["127.0.0.1", "0.0.0.0"])
def test_serves_on_the_address_asked(addr: str) -> None:
    metrics, url = _metrics(addr)
    try:
        assert metrics.address is not None
        host, port = metrics.address
        assert host == addr
        assert url.endswith(f":{port}/metrics")
        assert "loadgen_run_info" in _scrape(url)
    finally:
        metrics.stop()
    assert metrics.address is None


def test_default_address_is_loopback() -> None:
    metrics = LiveMetrics(RunLabels(**LABELS), {})
    metrics.serve(0)
    try:
        assert metrics.address == (DEFAULT_LISTEN_ADDRESS, metrics.address[1])
        assert DEFAULT_LISTEN_ADDRESS == "127.0.0.1"
    finally:
        metrics.stop()


def test_a_bad_address_is_named() -> None:
    metrics = LiveMetrics(RunLabels(**LABELS), {})
    with pytest.raises(OSError, match="bad listen address 'no such host.invalid'"):
        metrics.serve(0, "no such host.invalid")


def test_stop_waits_for_a_scrape_that_shows_the_end() -> None:
    metrics, url = _metrics()
    _scrape_twice(url)  # someone is scraping, every GAP_S
    metrics.end_ts.set(END_TS)
    bodies: list[str] = []

    def late_scrape() -> None:
        time.sleep(GAP_S)
        bodies.append(_scrape(url))

    scraper = threading.Thread(target=late_scrape)
    scraper.start()
    began = time.monotonic()
    metrics.stop()
    waited = time.monotonic() - began
    scraper.join()
    assert bodies
    assert _end_line(bodies[0]).endswith(" 1.795e+09")
    assert waited >= GAP_S * 0.9


def test_stop_gives_up_after_twice_the_scrape_interval() -> None:
    metrics, url = _metrics()
    _scrape_twice(url)
    metrics.end_ts.set(END_TS)
    began = time.monotonic()
    metrics.stop()  # nobody scrapes again
    waited = time.monotonic() - began
    assert 2 * GAP_S <= waited < 2 * GAP_S + 1.0 + NO_WAIT_S


def test_after_a_single_scrape_the_shipped_interval_is_assumed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        metrics_http, "ASSUMED_INTERVAL_S", GAP_S
    )  # a curl, or a run shorter than one interval
    metrics, url = _metrics()
    _scrape(url)
    metrics.end_ts.set(END_TS)
    began = time.monotonic()
    metrics.stop()
    waited = time.monotonic() - began
    assert 2 * GAP_S <= waited < 2 * GAP_S + 1.0 + NO_WAIT_S


def test_stop_does_not_wait_once_the_end_was_scraped_or_without_scrapes() -> None:
    scraped, url = _metrics()
    _scrape_twice(url)
    scraped.end_ts.set(END_TS)
    assert _end_line(_scrape(url)).endswith(" 1.795e+09")
    unscraped, _ = _metrics()
    unscraped.end_ts.set(END_TS)
    began = time.monotonic()
    scraped.stop()
    unscraped.stop()
    assert time.monotonic() - began < NO_WAIT_S


def test_stop_does_not_wait_for_a_run_that_never_ended() -> None:
    metrics, url = _metrics()
    _scrape_twice(url)
    began = time.monotonic()
    metrics.stop()  # e.g. loadgen failed before the end mark: nothing to show
    assert time.monotonic() - began < NO_WAIT_S
