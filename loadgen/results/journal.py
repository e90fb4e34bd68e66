"""requests.jsonl written while a run goes, so a killed run (kill -9, the OOM killer) keeps what it
measured: each finished request is encoded by the finisher (which parses in short slices between
reads and sends) and the lines are written in batches from the monitor's tick (4 times a second),
never on the send path. The encoded lines are kept, so the final index-ordered requests.jsonl
costs no second encoding."""

from __future__ import annotations

from pathlib import Path
from typing import IO

from loadgen.records import RequestRecord
from loadgen.results.record import request_text


class Journal:
    """Append-only requests.jsonl of one run; a write error stops the journal, not the run."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.pending: list[str] = []
        self.lines: dict[int, str] = {}
        self.error: str | None = None
        self._fh: IO[str] | None = None

    def add(self, record: RequestRecord, start_ns: int) -> None:
        """Encode a finished (parsed) request and queue its line for the next flush."""
        text = self.lines[record.index] = request_text(record, start_ns)
        if self.error is None:
            self.pending.append(text)

    def flush(self) -> None:
        """Append the queued lines (whole lines, then flush to the OS)."""
        if not self.pending:
            return
        texts, self.pending = self.pending, []
        try:
            if self._fh is None:
                self._fh = self.path.open("a", encoding="utf-8")
            self._fh.write("".join(texts))
            self._fh.flush()
        except OSError as exc:
            self.error = exc.strerror or type(exc).__name__
            self.close()

    def close(self) -> None:
        """Close the file (the final requests.jsonl replaces it atomically)."""
        if self._fh is not None:
            fh, self._fh = self._fh, None
            try:
                fh.close()
            except OSError as exc:  # a full disk can refuse the last buffered bytes
                self.error = self.error or exc.strerror or type(exc).__name__
