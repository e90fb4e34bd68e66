"""A hostile OpenAI-style server on a raw asyncio socket (127.0.0.1, port 0): `GET /v1/models`
answers properly (so a run gets past its preflight), and every completion is answered by one of
MODES, chosen round-robin per request. It writes bytes no aiohttp server would: random bytes in place
of HTTP, a head cut short, a broken chunk, random bytes in an SSE body, a 401 whose body comes late.

`HostileServer(modes)` is a context manager running the server in a thread (for CLI and sync tests).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import random
import threading
from collections.abc import Sequence

MODES = (
    "random_bytes",  # random bytes instead of an HTTP response, then close
    "random_bytes_open",  # random bytes, the connection left open (the client's timeout ends it)
    "head_cut",  # half a response head, then close
    "random_body",  # a 200 SSE head (until close), then random bytes, then close
    "random_chunked",  # a 200 chunked head, then random bytes as the chunk stream
    "bad_content_length",  # a 200 head with a Content-Length that is no number
    "reset",  # close the socket with RST as soon as the request arrived
    "slow_401",  # a 401 head and half its body at once, the rest `slow_401_s` later
)
MODELS = json.dumps({"object": "list", "data": [{"id": "hostile", "max_model_len": 4096}]}).encode()


def _random(rng: random.Random, n: int) -> bytes:
    """n random bytes that never happen to spell an HTTP status line (they do not start with H)."""
    data = bytearray(rng.getrandbits(8) for _ in range(n))
    data[0] = 0x00
    return bytes(data)


class HostileServer:
    """The server in a daemon thread (see module docstring); `base_url` once entered."""

    def __init__(self, modes: Sequence[str] = MODES, seed: int = 1, slow_401_s: float = 1.0) -> None:
        unknown = set(modes) - set(MODES)
        if unknown:
            raise ValueError(f"unknown hostile modes {sorted(unknown)}; valid: {MODES}")
        self._modes = itertools.cycle(modes)
        self._rng = random.Random(seed)
        self.slow_401_s = slow_401_s
        self.base_url = ""
        self.answered: list[str] = []  # the mode of each completion answered, in order
        self.by_request_id: dict[str, str] = {}  # X-Request-Id -> the mode it was answered with
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)

    async def _main(self) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        server = await asyncio.start_server(self._client, "127.0.0.1", 0)
        self.base_url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        self._ready.set()
        async with server:
            await self._stop.wait()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                length = next(
                    (int(h.split(":", 1)[1]) for h in lines if h.lower().startswith("content-length:")), 0
                )
                await reader.readexactly(length)
                if lines[0].startswith("GET /v1/models"):
                    writer.write(
                        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                        % (len(MODELS), MODELS)
                    )
                    await writer.drain()
                    continue
                mode = next(self._modes)
                self.answered.append(mode)
                rid = next(
                    (h.split(":", 1)[1].strip() for h in lines if h.lower().startswith("x-request-id:")), ""
                )
                self.by_request_id[rid] = mode
                await self._answer(mode, reader, writer)
                if mode == "reset":
                    writer.transport.abort()  # RST at once
                else:
                    writer.close()  # FIN after what was written: the client reads every byte first
                return
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.LimitOverrunError):
            writer.transport.abort()

    async def _answer(self, mode: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        rng = self._rng
        sse_head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
        if mode in ("random_bytes", "random_bytes_open"):
            writer.write(_random(rng, 512))
        elif mode == "head_cut":
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/ev")
        elif mode == "random_body":
            writer.write(sse_head + b"\r\n" + _random(rng, 2048))
        elif mode == "random_chunked":
            writer.write(sse_head + b"Transfer-Encoding: chunked\r\n\r\n" + _random(rng, 2048))
        elif mode == "bad_content_length":
            writer.write(sse_head + b"Content-Length: lots\r\n\r\ndata: {}\n\n")
        elif mode == "slow_401":
            body = b'{"error": {"message": "invalid api key", "code": 401}}'
            writer.write(b"HTTP/1.1 401 Unauthorized\r\nContent-Length: %d\r\n\r\n" % len(body))
            writer.write(body[:20])  # half the body now, the rest later
            await writer.drain()
            await asyncio.sleep(self.slow_401_s)
            writer.write(body[20:])
        await writer.drain()
        if mode == "random_bytes_open":
            await reader.read()  # until the client gives up and closes

    def __enter__(self) -> HostileServer:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("hostile server did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._loop is not None
        assert self._stop is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(5)
