"""The raw client opens the connections of a schedule's opening stretch before the run starts
(RawClient.preconnect, Run._preconnect): the first requests reuse them instead of connecting while
they are due. A real loopback server counts the connections."""

from __future__ import annotations

import asyncio
import socket

import pytest

from loadgen.run.measure import MAX_PRECONNECT, OPENING_NS, opening_connections
from tests.integration.test_loadgen_rawhttp import (
    HEAD_CHUNKED,
    Scripted,
    _chunk,
    _client,
    _send,
    _sse,
    scripted,
    writes,
)

pytestmark = pytest.mark.timeout(30)
MS = 1_000_000


async def test_preconnected_connections_carry_the_first_requests() -> None:
    body = b"".join(_chunk(m) for m in _sse(2)) + b"0\r\n\r\n"
    server = Scripted(*(writes(HEAD_CHUNKED + body) for _ in range(3)))
    async with scripted(server) as url:
        client = _client(url)
        assert await client.preconnect(3, 5.0) == 3
        await asyncio.sleep(0.05)  # the server has seen them all
        assert server.connections == 3
        records = await asyncio.gather(*(_send(client, i) for i in range(3)))
        client.close()
    assert [r.outcome for r in records] == ["ok"] * 3
    assert server.connections == 3  # no request opened one of its own


async def test_preconnect_to_a_port_nobody_listens_on_opens_none_and_raises_nothing() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
        client = _client(f"http://127.0.0.1:{probe.getsockname()[1]}")
        assert await client.preconnect(4, 2.0) == 0
        assert await client.preconnect(0, 2.0) == 0
        client.close()


def test_opening_connections_counts_the_requests_due_in_the_opening_stretch() -> None:
    # offsets 0, 100, 200, 300 ms: three are due within the first 250 ms (OPENING_NS)
    assert OPENING_NS == 250 * MS
    schedule = [0, 100 * MS, 200 * MS, 300 * MS]
    assert opening_connections(schedule, None) == 3
    assert opening_connections(schedule, 2) == 2  # --max-concurrency caps it
    assert (
        opening_connections([5 * MS, 5 * MS + OPENING_NS, 6 * MS + OPENING_NS], None) == 2
    )  # from the first
    assert opening_connections([0] * (MAX_PRECONNECT + 10), None) == MAX_PRECONNECT  # --rate inf
