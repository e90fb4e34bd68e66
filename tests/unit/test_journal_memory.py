"""Issue #11 item 18: a saturated run's memory stays flat. A request's line is not kept once the
journal wrote it (it is read back from disk for the final requests.jsonl), its per-token times are
released (the summary reads its ITLs back from the file, exactly), and the sent-sequence fingerprint
is digested as the run goes instead of holding every prompt. Each test compares with what the run
wrote before these changes."""

from __future__ import annotations

import random
from array import array
from pathlib import Path

import numpy as np
import pytest

from loadgen import stats
from loadgen.records import RequestRecord
from loadgen.results.journal import Journal
from loadgen.results.record import line_itls_ns, request_text, write_run
from loadgen.run.measure import RELEASED
from loadgen.run.steps import journaled_itls
from loadgen.stats import describe, describe_ns, itl_gaps_ns, itls_s, summarize
from loadgen.workload.generator import DIGEST_BATCH, RequestSpec, SentDigest, fingerprint

START = 10**12


def _record(index: int, rng: random.Random, outcome: str = "ok", warmup: bool = False) -> RequestRecord:
    sent = START + index * 5_000_000
    times = array("q", [sent + 20_000_000])
    for _ in range(rng.randint(1, 40)):
        times.append(times[-1] + rng.randint(500_000, 9_000_000))
    return RequestRecord(
        index,
        f"run-{index:06d}",
        warmup,
        sent - 1_000,
        16,
        len(times),
        sent_ns=sent,
        first_ns=times[0],
        last_ns=times[-1],
        done_ns=times[-1] + 1_000,
        token_ns=times,
        output_tokens=len(times),
        outcome=outcome,
    )


def _records(n: int = 60) -> list[RequestRecord]:
    rng = random.Random(18)
    return [_record(i, rng, "http_error" if i % 17 == 3 else "ok", warmup=i < 2) for i in range(n)]


def _release(record: RequestRecord) -> None:  # what Run.release does
    record.token_ns = RELEASED


def _journaled(path: Path, records: list[RequestRecord], order_seed: int = 3) -> Journal:
    """The records through a journal at `path`, finishing out of index order, flushed now and then."""
    journal = Journal(path, _release)
    finished = records[:]
    random.Random(order_seed).shuffle(finished)
    for k, record in enumerate(finished):
        journal.add(record, START)
        if k % 7 == 0:
            journal.flush()
    journal.flush()
    journal.close()
    return journal


def test_journal_keeps_no_line_in_memory_and_the_final_file_is_the_same(tmp_path: Path) -> None:
    records = _records()
    expected = "".join(request_text(r, START) for r in records)  # the whole file, encoded up front
    (tmp_path / "run").mkdir()
    journal = _journaled(tmp_path / "run" / "requests.jsonl", records)
    assert journal.pending == []
    assert all(r.token_ns == RELEASED for r in records)  # per-token times let go once on disk
    assert all(isinstance(v, tuple) for v in journal.where.values())  # places only, no texts
    lines = journal.lines()
    written = write_run(tmp_path, "run", {"config": {}}, {}, records, START, lines)
    lines.close()
    assert "requests.jsonl" not in written.not_written
    assert (tmp_path / "run" / "requests.jsonl").read_text() == expected  # index order, byte-identical


def test_itls_read_back_from_the_journal_give_the_summary_of_the_unreleased_records(tmp_path: Path) -> None:
    before = summarize(_records(), {})
    records = _records()
    on_disk = records[::2]  # half journaled (released), half not (a journal that failed later)
    journal = _journaled(tmp_path / "requests.jsonl", on_disk)
    itl, missing = journaled_itls(journal, records)
    assert missing is None
    after = summarize(records, {}, itl)
    assert after["itl_s"] == before["itl_s"]  # exact: each gap round-trips through its line
    assert after["itl_s"]["count"] == sum(len(r.token_ns) - 1 for r in _records()[2:] if r.outcome == "ok")
    (tmp_path / "requests.jsonl").unlink()  # the file went away under the run: said, not hidden
    assert journaled_itls(journal, records)[1] is not None


def test_line_itls_are_the_gaps_in_ns() -> None:
    for record in _records(20):
        gaps = list(itl_gaps_ns((record,)))
        assert line_itls_ns(request_text(record, START).encode()) == gaps
    single = _records(1)[0]
    single.token_ns = single.token_ns[:1]
    assert line_itls_ns(request_text(single, START).encode()) == []


def test_a_journal_that_cannot_write_releases_nothing_and_the_record_is_still_whole(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a folder")
    records = _records(10)
    journal = Journal(tmp_path / "file" / "requests.jsonl", _release)
    for record in records:
        journal.add(record, START)
    journal.flush()
    assert journal.error is not None
    assert all(len(r.token_ns) > 0 for r in records)  # still needed: the final file encodes them
    lines = journal.lines()
    write_run(tmp_path, "run", {"config": {}}, {}, records, START, lines)
    assert (tmp_path / "run" / "requests.jsonl").read_text() == "".join(
        request_text(r, START) for r in records
    )


@pytest.mark.parametrize("steps", [[0], [1, 1, 1], [2, 0, 5], [100]])
def test_the_sent_digest_is_the_fingerprint_however_it_is_stepped(steps: list[int]) -> None:
    specs = [RequestSpec(i, [100 + i, 200, 300], 3, 8) for i in range(12)]
    sent = SentDigest()
    for k, spec in enumerate(specs):
        sent.add(spec)
        sent.step(steps[k % len(steps)])
    assert sent.value() == fingerprint(specs)
    assert sent.count == len(specs)
    assert len(sent._waiting) == 0  # digested specs are let go
    assert sent.value() == fingerprint(specs)  # reading it twice changes nothing


def test_the_finishers_catch_up_digests_in_batches_and_keeps_the_fingerprint() -> None:
    specs = [RequestSpec(i, [100 + i, 200, 300], 3, 8) for i in range(3 * DIGEST_BATCH + 5)]
    sent = SentDigest()
    for spec in specs:
        sent.add(spec)
        sent.catch_up()  # one request finishes per send
        assert len(sent._waiting) < DIGEST_BATCH  # never more than a batch waits
    assert len(sent._waiting) == 5  # the rest, under a batch, waits for value()
    assert sent.value() == fingerprint(specs)


def test_describe_ns_matches_numpy_and_the_float_describe() -> None:
    rng = np.random.default_rng(11)
    gaps = array("q", rng.integers(100_000, 80_000_000, size=5_001).tolist())
    got = describe_ns(gaps)
    seconds = np.asarray(gaps, dtype=np.float64) / 1e9
    for q in (50, 90, 95, 99):
        assert got[f"p{q}"] == pytest.approx(np.percentile(seconds, q), rel=1e-12)
    assert got["mean"] == pytest.approx(seconds.mean(), rel=1e-12)
    assert got["std"] == pytest.approx(seconds.std(), rel=1e-9)
    as_floats = describe(g / 1e9 for g in gaps)
    assert got["count"] == as_floats["count"] == len(gaps)
    assert got["min"] == as_floats["min"]
    assert got["max"] == as_floats["max"]
    assert describe_ns(array("q")) == describe(())


def test_describe_ns_is_the_same_sorted_either_way(monkeypatch: pytest.MonkeyPatch) -> None:
    gaps = array("q", np.random.default_rng(5).integers(1, 10**9, size=2_001).tolist())
    small = describe_ns(gaps)
    monkeypatch.setattr(stats, "NUMPY_SORT_FROM", 1)  # the numpy path of a saturated run's millions
    assert describe_ns(gaps) == small


def test_itl_gaps_are_the_itls_in_ns() -> None:
    record = _records(3)[2]
    assert [g / 1e9 for g in itl_gaps_ns((record,))] == pytest.approx(itls_s(record), abs=1e-15)


@pytest.mark.parametrize("kept_max", [10**6, 200], ids=["kept", "too many: read back"])
def test_the_gaps_a_run_keeps_as_it_releases_give_the_same_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kept_max: int
) -> None:
    """Run.release keeps the measured ok requests' gaps while they fit (8 bytes a gap), so the summary
    reads nothing back; past KEPT_GAPS it keeps none and the journal gives them back, the same."""
    from loadgen.config import RunConfig
    from loadgen.run import measure

    monkeypatch.setattr(measure, "KEPT_GAPS", kept_max)
    before = summarize(_records(), {})
    records = _records()
    run = measure.Run(RunConfig(results_dir=str(tmp_path)), "run", progress=False)
    journal = Journal(tmp_path / "requests.jsonl", run.release)
    finished = records[:]
    random.Random(5).shuffle(finished)
    for record in finished:
        journal.add(record, START)
    journal.flush()
    journal.close()
    assert all(r.token_ns == RELEASED for r in records)
    if kept_max > 200:
        assert run.gaps is not None
        assert len(run.gaps) == before["itl_s"]["count"]
    else:
        assert run.gaps is None  # over the bound: none kept
    itl, missing = journaled_itls(journal, records, run.gaps)
    assert missing is None
    assert summarize(records, {}, itl)["itl_s"] == before["itl_s"]


def test_the_final_file_copies_stretches_of_the_journal_in_long_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lines in file order come in reads of up to SPAN_BYTES, lines out of order and lines that never
    reached the file are placed where their index says: the same bytes as line by line."""
    from loadgen.results import journal as journal_module

    records = _records(80)
    expected = "".join(request_text(r, START) for r in records)
    journal = Journal(tmp_path / "requests.jsonl", _release)
    order = records[:30] + records[40:] + records[30:35]  # 35-39: never written; 30-34 come last
    for k, record in enumerate(order):
        journal.add(record, START)
        if k % 9 == 0:
            journal.flush()
    journal.flush()
    journal.close()
    monkeypatch.setattr(journal_module, "SPAN_BYTES", 2_000)  # a few lines a read here
    reads: list[int] = []
    real_pread = journal_module.os.pread

    def pread(fd: int, size: int, offset: int) -> bytes:
        reads.append(size)
        return real_pread(fd, size, offset)

    monkeypatch.setattr(journal_module.os, "pread", pread)
    lines = journal.lines()
    written = write_run(tmp_path, "run", {"config": {}}, {}, records, START, lines)
    assert "requests.jsonl" not in written.not_written
    assert (tmp_path / "run" / "requests.jsonl").read_text() == expected
    assert 3 < len(reads) < 75 - 10  # stretches, not a read per line
    longest_line = max(len(request_text(r, START)) for r in records)
    assert max(reads) < 2_000 + longest_line


def test_a_journal_cut_short_is_said_and_not_written_over(tmp_path: Path) -> None:
    records = _records(20)
    (tmp_path / "run").mkdir()
    journal = _journaled(tmp_path / "run" / "requests.jsonl", records)
    path = tmp_path / "run" / "requests.jsonl"
    path.write_bytes(path.read_bytes()[:-500])  # the disk lost the file's end
    written = write_run(tmp_path, "run", {"config": {}}, {}, records, START, journal.lines())
    assert "requests.jsonl" in written.not_written
    assert (
        path.stat().st_size > 0
    )  # the journal stays as it was (the final file replaces it whole or not at all)


def test_a_journal_in_index_order_is_the_final_file_as_it_stands(tmp_path: Path) -> None:
    """Each flush writes its lines in index order; where the whole journal then is the index-ordered
    file, write_run keeps it (fsynced, same inode) instead of copying it; one line out of place, a
    missing line or a journal elsewhere and it copies as before, byte for byte the same."""
    records = _records(40)
    expected = "".join(request_text(r, START) for r in records)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    path = run_dir / "requests.jsonl"
    journal = Journal(path, _release)
    for batch in (records[:13], records[13:27], records[27:]):
        for record in reversed(batch):  # finished out of order within each flush
            journal.add(record, START)
        journal.flush()
    journal.close()
    assert path.read_text() == expected  # sorted at each flush
    inode = path.stat().st_ino
    assert journal.lines().in_order(records, path)
    written = write_run(tmp_path, "run", {"config": {}}, {}, records, START, journal.lines())
    assert "requests.jsonl" not in written.not_written
    assert path.stat().st_ino == inode  # not rewritten
    assert path.read_text() == expected

    swapped = Journal(path, _release)
    path.unlink()
    records = _records(40)  # their token times again (the first journal released them)
    for batch in (records[:20] + [records[21]], [records[20]] + records[22:]):  # 21 flushed before 20
        for record in batch:
            swapped.add(record, START)
        swapped.flush()
    swapped.close()
    lines = swapped.lines()
    assert not lines.in_order(records, path)
    assert not lines.in_order(records[:-1], path)  # the file holds more than these lines
    assert not journal.lines().in_order(records, tmp_path / "elsewhere.jsonl")
    inode = path.stat().st_ino
    written = write_run(tmp_path, "run", {"config": {}}, {}, records, START, lines)
    assert "requests.jsonl" not in written.not_written
    assert path.stat().st_ino != inode  # copied, in index order
    assert path.read_text() == expected
