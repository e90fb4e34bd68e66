"""The response head's parse in C (`loadgen.transport._kread.head`) against `_Conn._head`'s in Python:
where C answers, the same status, HTTP/1.0-ness, framing fields and body; the rest is left to Python."""

from __future__ import annotations

import random

import pytest

_kread = pytest.importorskip("loadgen.transport._kread", reason="the C reader is not built here")

KEYS = ("connection", "transfer-encoding", "content-length")


def _python(buf: bytes) -> tuple[int, bool, dict[str, str], bytes] | None:
    """What `_Conn._head` takes from a whole head: None where it fails the status line or waits."""
    cut = buf.find(b"\r\n\r\n")
    if cut < 0:
        return None
    head, body = buf[:cut].decode("latin-1").split("\r\n"), buf[cut + 4 :]
    status = head[0].split(" ", 2)
    if (
        len(status) < 2
        or not status[0].startswith("HTTP/1.")
        or not (status[1].isascii() and status[1].isdigit())
    ):
        return None
    fields = {k.strip().lower(): v.strip().lower() for k, _, v in (h.partition(":") for h in head[1:])}
    return int(status[1]), status[0] == "HTTP/1.0", {k: v for k, v in fields.items() if k in KEYS}, body


def _head(rng: random.Random) -> bytes:
    version = rng.choice([b"HTTP/1.1", b"HTTP/1.0", b"HTTP/1.", b"HTTP/2", b"http/1.1", b"HTTP/1.1x"])
    code = rng.choice([b"200", b"404", b"0200", b"", b"20x", b"1234567890", b"\xb2"])
    line = version + rng.choice([b" ", b"  ", b""]) + code + rng.choice([b" OK", b"", b" Not Found", b"  x"])
    names = [
        b"Connection",
        b"Transfer-Encoding",
        b"content-length",
        b"Content-Type",
        b"X-Request-Id",
        b"connectionx",
    ]
    values = [
        b"close",
        b"Keep-Alive",
        b"chunked",
        b" Chunked\t",
        b"12",
        b" 7 ",
        b"",
        b"\x1fclose\x0b",
        b"caf\xe9",
    ]
    fields = []
    for _ in range(rng.randrange(0, 7)):
        name = rng.choice(names)
        if rng.random() < 0.2:
            name = name.upper() if rng.random() < 0.5 else b" " + name + b"\x1c"
        sep = rng.choice([b": ", b":", b" : ", b""])
        fields.append(name + sep + rng.choice(values) + rng.choice([b"", b"\r", b"\n x"]))
    body = rng.choice([b"", b"5\r\ndata:\r\n", b"0\r\n\r\n"])
    return b"\r\n".join([line, *fields]) + rng.choice([b"\r\n\r\n", b"\r\n\r\n", b"\r\n"]) + body


def test_random_heads_parse_as_in_python() -> None:
    rng = random.Random(29)
    answered = 0
    for _ in range(20_000):
        buf = _head(rng)
        got, python = _kread.head(buf), _python(buf)
        if got is None:  # declined: a head Python takes only when past ASCII or with a long status code
            head = buf[: buf.find(b"\r\n\r\n")]
            assert python is None or not head.isascii() or len(head.split(b" ")[1]) > 9, buf
            continue
        answered += 1
        assert got == python, buf
    assert answered > 500


def test_the_usual_heads() -> None:
    vllm = (
        b"HTTP/1.1 200 OK\r\ndate: x\r\nserver: uvicorn\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
        b"transfer-encoding: chunked\r\n\r\n5\r\n"
    )
    assert _kread.head(vllm) == (200, False, {"transfer-encoding": "chunked"}, b"5\r\n")
    error = b"HTTP/1.0 400 Bad Request\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"
    assert _kread.head(error) == (400, True, {"content-length": "2", "connection": "close"}, b"{}")


@pytest.mark.parametrize(
    "buf",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: 3",  # no blank line yet: Python waits for more
        b"HTTP/1.1 200 OK\r\nServer: caf\xe9\r\n\r\n",  # past ASCII: latin-1's own lower() and strip()
        b"HTTP/1.1 2x0 OK\r\n\r\n",  # Python's error message
        b"HTTP/1.1 \xb2 OK\r\n\r\n",  # str.isdigit() takes a superscript two, int() does not
        b"HTTP/2 200\r\n\r\n",
        b"HTTP/1.1 12345678901 OK\r\n\r\n",
    ],
)
def test_heads_left_to_python(buf: bytes) -> None:
    assert _kread.head(buf) is None
