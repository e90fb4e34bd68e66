"""requests.jsonl written while a run goes, so a killed run (kill -9, the OOM killer) keeps what it
measured: each finished request is encoded by the finisher (which parses in short slices between
reads and sends) and the lines are written in batches from the monitor's tick (4 times a second),
never on the send path.

Memory stays flat however long the run: a line is not kept once it is on disk (only where it is:
`JournalLines` reads it back for the final, index-ordered requests.jsonl), and `on_written` lets the
run release what the line holds (the request's per-token times; the run keeps a short run's gaps
itself, and `read_itls` gives a longer run's summary its ITLs back from the file, exactly)."""

from __future__ import annotations

import encodings.ascii  # noqa: F401 - the codec of the first flush, loaded now, not mid-run (~0.5 ms)
import errno
import os
from array import array
from collections.abc import Callable, Container, Iterator, Sequence
from pathlib import Path
from typing import IO

from loadgen.records import RequestRecord
from loadgen.results.record import line_itls_ns, request_text


class JournalLines:
    """The journal's lines by request index, read back from the file (a `Mapping.get` for write_run)."""

    def __init__(self, path: Path, where: dict[int, tuple[int, int]]) -> None:
        self.path, self.where = path, where
        self._fh: IO[bytes] | None = None

    def get(self, index: int) -> str | None:
        """The line of request `index` (newline included), None when it never reached the file."""
        at = self.where.get(index)
        if at is None:
            return None
        if self._fh is None:
            self._fh = self.path.open("rb")
        self._fh.seek(at[0])
        return self._fh.read(at[1]).decode()

    def blocks(self, records: Sequence[RequestRecord], missing: Callable[[RequestRecord], str]) -> Iterator[bytes]:
        """The lines of `records`, in that order, as bytes: lines that lie one after another in the
        file come in one read of up to SPAN_BYTES (a run's requests mostly finish in the order they
        were sent, so the index-ordered requests.jsonl is mostly long stretches of the journal), and a
        record whose line never reached the file gets `missing(record)`. The same bytes as `get`
        line by line, without a seek, a buffered read and a decode per line. The file is opened at
        the first line it holds (a journal that never wrote is never opened)."""
        fd, start, end = -1, -1, -1
        try:
            for record in records:
                at = self.where.get(record.index)
                if at is not None and at[0] == end and end - start < SPAN_BYTES:
                    end += at[1]
                    continue
                if start >= 0:
                    yield _pread_exact(fd, start, end - start)
                if at is None:
                    start = end = -1
                    yield missing(record).encode()
                    continue
                if fd < 0:
                    fd = os.open(self.path, os.O_RDONLY)
                start, end = at[0], at[0] + at[1]
            if start >= 0:
                yield _pread_exact(fd, start, end - start)
        finally:
            if fd >= 0:
                os.close(fd)

    def in_order(self, records: Sequence[RequestRecord], final: Path) -> bool:
        """True when the journal is the file at `final` and holds exactly the lines of `records` in
        that order, one after another from its first byte to its last: then it is the final
        requests.jsonl as it stands. A run's requests mostly finish in the order they were sent and
        each flush writes its lines in index order (`Journal.flush`), so in a steady run the whole
        journal often is; else `blocks` copies it."""
        end, where = 0, self.where
        for record in records:
            at = where.get(record.index)
            if at is None or at[0] != end:
                return False
            end += at[1]
        try:
            return os.path.samefile(self.path, final) and os.stat(self.path).st_size == end
        except OSError:
            return False

    def close(self) -> None:
        """Close the file read from."""
        if self._fh is not None:
            self._fh.close()
            self._fh = None


SPAN_BYTES = 1 << 20  # the most `JournalLines.blocks` reads at once


def _index(item: tuple[RequestRecord, str]) -> int:
    return item[0].index


def _pread_exact(fd: int, offset: int, size: int) -> bytes:
    """`size` bytes of the file at `offset`; OSError when it holds fewer (it was cut short)."""
    data = os.pread(fd, size, offset)
    while len(data) < size:
        more = os.pread(fd, size - len(data), offset + len(data))
        if not more:
            raise OSError(errno.EIO, f"journal ends before byte {offset + size}")
        data += more
    return data


class Journal:
    """Append-only requests.jsonl of one run; a write error stops the journal, not the run."""

    def __init__(self, path: Path, on_written: Callable[[RequestRecord], None] | None = None) -> None:
        self.path = path
        self.on_written = on_written
        self.pending: list[tuple[RequestRecord, str]] = []
        self.where: dict[int, tuple[int, int]] = {}  # index -> (offset, length) of its line in the file
        self.error: str | None = None
        self._fh: IO[str] | None = None
        self._size = 0

    def add(self, record: RequestRecord, start_ns: int) -> None:
        """Encode a finished (parsed) request and queue its line for the next flush."""
        if self.error is None:
            self.pending.append((record, request_text(record, start_ns)))

    def flush(self) -> None:
        """Append the queued lines (whole lines, then flush to the OS); once written, each line's
        place is noted and its record handed to `on_written`."""
        if not self.pending:
            return
        batch, self.pending = self.pending, []
        batch.sort(key=_index)  # requests finish out of order now and then: the lines in index order
        try:
            if self._fh is None:
                self._fh = self.path.open("a", encoding="ascii")  # JSON lines are ASCII: chars = bytes
                self._size = self._fh.tell()
            self._fh.write("".join(text for _, text in batch))
            self._fh.flush()
        except OSError as exc:
            self.error = exc.strerror or type(exc).__name__
            self.close()
            return
        offset = self._size
        for record, text in batch:
            self.where[record.index] = (offset, len(text))
            offset += len(text)
            if self.on_written is not None:
                self.on_written(record)
        self._size = offset

    def read_itls(self, wanted: Container[int], into: array[int]) -> None:
        """Append the ITLs (ns) of the wanted requests whose lines are on disk, in file order."""
        with self.path.open("rb") as fh:
            for index, (offset, length) in self.where.items():
                if index in wanted:
                    fh.seek(offset)
                    into.extend(line_itls_ns(fh.read(length)))

    def lines(self) -> JournalLines:
        """The lines on disk, by request index (for the final requests.jsonl)."""
        return JournalLines(self.path, self.where)

    def close(self) -> None:
        """Close the file (the final requests.jsonl replaces it atomically)."""
        if self._fh is not None:
            fh, self._fh = self._fh, None
            try:
                fh.close()
            except OSError as exc:  # a full disk can refuse the last buffered bytes
                self.error = self.error or exc.strerror or type(exc).__name__
