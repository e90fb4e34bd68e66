"""The chunked framing of a streamed body, read where its bytes enter Python (no aiohttp here: the raw
client and aiohttp's stamping connection, loadgen.transport.stamping, both use it).

`ChunkedBody.feed(t, data)` records each read's body bytes as `(t, bytes)` in `Reads` and marks a read
that is exactly one compact token event; at the last (zero-size) chunk, or framing it does not expect,
it returns the bytes from a chunk boundary on for the caller's own parser.
"""

from __future__ import annotations

import re

from loadgen.transport.sse import COMPACT_TOKEN

MAX_CHUNK_HEAD = 4096  # a longer chunk-size line goes to the caller's parser (which rejects it)


class Reads(list[tuple[int, bytes]]):
    """The stamped pieces of one body, `(perf_counter_ns, bytes)`; `marks[i]` is 1 when piece i was
    recognised on arrival (cache-hot) as exactly one compact token event, `data: {..."choices":[{...}\n\n`
    on one line, so `sse.parse_stream` need not look at it again (see sse.py's fast paths).

    `elided` (a bytearray, set by the raw client for a 200 response whose answer text no one reads):
    the C reader lets each marked read between the first and the last go as the next one arrives; its
    place holds None and its stamp is the next 8 bytes (native int64) of `elided`. The fast parses take
    only a marked read's stamp, and the first and last marked reads' bytes, so what they read is the
    same; a stream they do not take (CR framing, comments, multi-line events elsewhere in it) reads each
    elided read as `sse.STAND_IN` (`sse.restored`): a token event, whose text, finish reason or a usage
    inside it (vLLM's continuous usage; the final usage event is another read) is not read, as the fast
    parses never read them. A run holds ~2 reads a stream in flight instead of all of them, and the
    finisher walks and frees none."""

    __slots__ = ("marks", "elided")

    def __init__(self) -> None:
        super().__init__()
        self.marks = bytearray()
        self.elided: bytearray | None = None


class ChunkedBody:
    """Reads the chunked framing of one body and records each read's data (see module docstring)."""

    __slots__ = ("pieces", "need", "head", "marks")

    def __init__(self, pieces: list[tuple[int, bytes]]) -> None:
        self.pieces = pieces
        self.need = 0  # bytes left of the current chunk's data plus its CRLF
        self.head = b""  # a chunk-size line split across reads
        self.marks = pieces.marks if isinstance(pieces, Reads) else bytearray()  # one per piece

    def feed(self, t: int, data: bytes) -> bytes | None:
        """Record one read; at the last chunk (or unexpected framing) return the bytes, from a chunk
        boundary on, that the caller's HTTP parser must get."""
        if not self.need and not self.head:  # the usual read: exactly one whole chunk
            cut = data.find(b"\r\n")
            if 0 < cut < 17:
                try:
                    size = int(data[:cut], 16)
                except ValueError:
                    size = 0
                end = cut + 2 + size
                if size > 0 and len(data) == end + 2 and data[end:] == b"\r\n":
                    piece = data[cut + 2 : end]
                    self.pieces.append((t, piece))
                    self.marks.append(
                        piece.startswith(b"data: {")
                        and piece.endswith(b"}\n\n")
                        and piece.find(COMPACT_TOKEN) > 0  # not `in`: see sse._token_marks
                        and piece.count(b"\n") == 2
                    )
                    return None
        return self._feed(t, self.head + data if self.head else data)

    def _feed(self, t: int, buf: bytes) -> bytes | None:
        self.head = b""
        pos, n, body = 0, len(buf), []
        rest = None
        while pos < n:
            need = self.need
            if need:
                take = min(need, n - pos)
                data_end = pos + min(take, need - 2) if need > 2 else pos
                if data_end > pos:
                    body.append(buf[pos:data_end])
                self.need, pos = need - take, pos + take
                continue
            cut = buf.find(b"\r\n", pos, pos + MAX_CHUNK_HEAD)
            if cut < 0:
                if n - pos >= MAX_CHUNK_HEAD or not chunk_size_prefix(buf[pos:]):
                    rest = buf[pos:]
                else:
                    self.head = buf[pos:]
                break
            try:
                size = int(buf[pos:cut].split(b";", 1)[0], 16)
            except ValueError:
                size = 0
            if size <= 0:  # the last chunk (or framing left to the caller)
                rest = buf[pos:]
                break
            self.need, pos = size + 2, cut + 2
        if body:
            self.pieces.append((t, b"".join(body)))
            self.marks.append(0)
        return rest


_SIZE_PREFIX = re.compile(rb"[0-9A-Fa-f]*(?:[ \t]*;[^\r\n]*)?\r?")


def chunk_size_prefix(data: bytes) -> bool:
    """True when `data` (no CRLF yet) can still become a chunk-size line: hex digits, then maybe
    `;extensions`. Random bytes fail at once instead of waiting for a CRLF that never comes."""
    return _SIZE_PREFIX.fullmatch(data) is not None
