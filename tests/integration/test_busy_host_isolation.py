"""Issue #22 item 21: no test depends on what else runs on the host.

An exporter left on the default 127.0.0.1:9402 discovers the tests' simulated engines by their
processes; `tests/conftest.py` keeps the suite away from it, and `--exporter-url none` is how a user
(and the suite's subprocesses) attach no exporter at all.
"""

from __future__ import annotations

import os

import aiohttp
import pytest

from loadgen.config import ConfigError, RunConfig
from loadgen.targets import exporter_client
from loadgen.targets.exporter_client import attach_exporter

from .test_engines_exporter_attach import OUR_ENGINE, exporter_serving


async def test_exporter_url_none_attaches_none_even_one_watching_the_target() -> None:
    async with exporter_serving([OUR_ENGINE]) as url, aiohttp.ClientSession() as session:
        watched, _ = await attach_exporter(session, None, "http://127.0.0.1:8123", default=url)
        manifest, why = await attach_exporter(session, "none", "http://127.0.0.1:8123", default=url)
    assert watched is not None  # the exporter does watch the target ...
    assert manifest is None  # ... and `none` still attaches nothing
    assert why == "not attached: --exporter-url none"


def test_the_suite_never_reads_the_hosts_default_exporter() -> None:
    assert exporter_client.EXPORTER_DEFAULT != "http://127.0.0.1:9402"
    assert os.environ["LOADGEN_EXPORTER_URL"] == "none"  # what subprocess runs inherit


def test_a_bad_exporter_url_is_named() -> None:
    with pytest.raises(ConfigError, match=r"invalid exporter_url 'ftp://x:9402'"):
        RunConfig(exporter_url="ftp://x:9402")
    assert RunConfig(exporter_url="none").exporter_url == "none"
