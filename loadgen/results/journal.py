"""requests.jsonl written while a run goes, so a killed run (kill -9, the OOM killer) keeps what it
measured: finished requests are queued by the finisher (one list append) and written in batches from
the monitor's tick (4 times a second), never on the send path. The encoded lines are kept so the
final, index-ordered requests.jsonl costs no second encoding."""

from __future__ import annotations

from pathlib import Path
from typing import IO

from loadgen.records import RequestRecord
from loadgen.results.record import request_text


class Journal:
    """Append-only requests.jsonl of one run; a write error stops the journal, not the run."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.pending: list[RequestRecord] = []
        self.lines: dict[int, str] = {}
        self.error: str | None = None
        self._fh: IO[str] | None = None

    def add(self, record: RequestRecord) -> None:
        """Queue a finished (parsed) request for the next flush."""
        self.pending.append(record)

    def flush(self, start_ns: int) -> None:
        """Encode and append what is queued (whole lines, then flush to the OS)."""
        if not self.pending:
            return
        batch, self.pending = self.pending, []
        texts = [request_text(r, start_ns) for r in batch]
        self.lines.update(zip((r.index for r in batch), texts, strict=True))
        if self.error is not None:
            return
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
