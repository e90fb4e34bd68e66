"""Trace replay, pure parts: formats and their FILE:LINE errors, hash-id blocks, the replay plan
(window, sampling, speedup, truncation) and the fingerprints' reproducibility."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from loadgen.config import ConfigError, RunConfig
from loadgen.workload.trace import TraceWorkload, block_tokens, plan_rows, prompt_tokens
from loadgen.workload.trace_formats import detect_format, parse_trace, read_trace
from loadgen.workload.traffic_config import TrafficConfig

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "traces"


def _config(trace: Path, seed: int = 42, **traffic: object) -> RunConfig:
    return RunConfig(seed=seed, traffic=TrafficConfig(trace=str(trace), **traffic))  # type: ignore[arg-type]


def _jsonl(path: Path, rows: list[object]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def test_equal_hash_ids_give_identical_blocks_and_exact_lengths() -> None:
    # two requests share hash ids 7 and 8, then differ (9 vs 10); block size 16
    a = prompt_tokens(seed=1, index=0, input_len=40, hash_ids=(7, 8, 9), block_size=16)
    b = prompt_tokens(seed=1, index=1, input_len=35, hash_ids=(7, 8, 10), block_size=16)
    assert len(a) == 40
    assert len(b) == 35
    assert a[:32] == b[:32] == list(block_tokens(1, 7, 16) + block_tokens(1, 8, 16))
    assert a[32:] != b[32:35]
    assert a[32:] == list(block_tokens(1, 9, 16))[:8]  # the partial block is block 9's start


def test_blocks_depend_on_the_seed_and_missing_hash_ids_get_unique_blocks() -> None:
    assert block_tokens(1, 7, 16) != block_tokens(2, 7, 16)
    # no hash ids (Azure): two requests of the same length share nothing
    a = prompt_tokens(seed=1, index=0, input_len=32, hash_ids=None, block_size=16)
    b = prompt_tokens(seed=1, index=1, input_len=32, hash_ids=None, block_size=16)
    assert len(a) == len(b) == 32
    assert a[:16] != b[:16]
    # more hash ids than the length needs: the extra ones are ignored
    assert prompt_tokens(1, 0, 16, (7, 8, 9), 16) == list(block_tokens(1, 7, 16))


@pytest.mark.parametrize(
    ("name", "fmt", "first_t", "block"),
    [
        ("mooncake-small.jsonl", "mooncake", 4.069, 512),  # 4069 ms
        ("alibaba-small.jsonl", "alibaba", 5.623, 16),
        ("infergauge-small.jsonl", "infergauge", 0.088, 16),
        ("azure-small.csv", "azure", None, 16),
    ],
)
def test_the_shipped_examples_parse_in_their_detected_format(
    name: str, fmt: str, first_t: float | None, block: int
) -> None:
    parsed, data = read_trace(str(EXAMPLES / name))
    assert parsed.fmt == fmt
    assert len(parsed.rows) >= 20
    if first_t is not None:
        assert parsed.rows[0].t_s == pytest.approx(first_t)
    workload = TraceWorkload(_config(EXAMPLES / name))
    assert workload.block_size == block
    assert workload.describe()["trace_sha256"] == f"sha256:{hashlib.sha256(data).hexdigest()}"
    for index, planned in enumerate(workload.planned):
        assert len(workload.request(index).prompt) == planned.row.input_len  # exact lengths


def test_alibaba_turns_are_grouped_into_their_conversation() -> None:
    text = "\n".join(
        json.dumps(
            {
                "chat_id": c,
                "parent_chat_id": p,
                "timestamp": t,
                "input_length": 4,
                "output_length": 2,
                "hash_ids": [1],
                "turn": 1,
            }
        )  # fmt: skip
        for c, p, t in ((0, -1, 0.0), (1, -1, 0.5), (2, 0, 1.0), (3, 2, 2.0))
    )
    rows = parse_trace(text, "t.jsonl").rows
    assert [r.session for r in rows] == ["0", "1", "0", "0"]  # 3's parent is 2, whose parent is 0


def test_azure_times_are_relative_seconds_of_the_csv() -> None:
    text = (
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:47.0000000,10,5\n"
    )
    rows = parse_trace(text, "a.csv").rows
    assert rows[1].t_s - rows[0].t_s == pytest.approx(0.31941, abs=1e-6)
    assert (rows[0].input_len, rows[0].output_len, rows[0].line) == (374, 44, 2)


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (['{"timestamp": 0, "input_length": 4, "output_length": 2, "hash_ids": [1]}', "{oops"],
         "t.jsonl:2: invalid JSON"),
        (['{"timestamp": 0, "input_length": 0, "output_length": 2, "hash_ids": [1]}'],
         "t.jsonl:1: field 'input_length' must be an integer >= 1, got 0"),
        (['{"timestamp": 0, "input_length": 4, "output_length": 2, "hash_ids": [1]}',
          '{"timestamp": 5, "input_length": 4, "hash_ids": [1]}'],
         "t.jsonl:2: field 'output_length' must be an integer >= 1, got None"),
        (['{"timestamp": 9, "input_length": 4, "output_length": 2, "hash_ids": [1]}', "",
          '{"timestamp": 3, "input_length": 4, "output_length": 2, "hash_ids": [1]}'],
         "t.jsonl:3: timestamp goes back in time"),
        (['{"timestamp": 0, "input_length": 4, "output_length": 2, "hash_ids": "abc"}'],
         "t.jsonl:1: field 'hash_ids' must be a list of integers"),
        (['{"t": -1, "input_len": 4, "output_len": 2}'], "t.jsonl:1: field 't' must be a number >= 0"),
        (['{"prompt": "hi"}'], "t.jsonl:1: cannot tell the trace format"),
        (["TIMESTAMP,ContextTokens,GeneratedTokens", "yesterday,4,2"],
         "t.jsonl:2: field 'TIMESTAMP' is not a date-time"),
        (["TIMESTAMP,ContextTokens,GeneratedTokens", "2023-11-16 18:15:46,four,2"],
         "t.jsonl:2: field 'ContextTokens' must be an integer >= 1, got 'four'"),
    ],
)  # fmt: skip
def test_bad_trace_files_name_file_and_line(tmp_path: Path, lines: list[str], message: str) -> None:
    path = _jsonl(tmp_path / "t.jsonl", lines)
    with pytest.raises(ConfigError) as err:
        read_trace(str(path))
    text = str(err.value).replace(str(tmp_path) + "/", "")
    assert text.startswith(message)
    assert "\n" not in text


def test_not_utf8_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"t": 0, "input_len": 4, "output_len": 2}\n{"t": 1, "input_len": 4\xff}\n')
    with pytest.raises(ConfigError, match=r"t\.jsonl:2: not UTF-8 \(byte 0xff\)"):
        read_trace(str(path))


def test_detect_format_prefers_alibaba_when_turns_are_linked() -> None:
    assert detect_format('{"chat_id": 1, "timestamp": 0, "hash_ids": []}', "x") == "alibaba"
    assert detect_format('{"timestamp": 0, "hash_ids": []}', "x") == "mooncake"
    assert detect_format('{"format": "infergauge-trace"}', "x") == "infergauge"


def _rows(tmp_path: Path) -> Path:
    # 10 requests 1 s apart, two sessions alternating
    rows = [{"t": float(i), "input_len": 8, "output_len": 2, "session_id": f"s{i % 2}"} for i in range(10)]
    return _jsonl(tmp_path / "r.jsonl", rows)


def test_window_speedup_and_truncation(tmp_path: Path) -> None:
    path = _rows(tmp_path)
    rows = read_trace(str(path))[0].rows
    cfg = _config(path, trace_start_s=2.0, trace_end_s=8.0, trace_speedup=2.0)
    assert cfg.traffic is not None
    planned = plan_rows(rows, cfg, cfg.traffic)
    # t = 2..7 kept, shifted to the window start and halved: 0, 0.5, ..., 2.5 s
    assert [p.offset_ns for p in planned] == [i * 500_000_000 for i in range(6)]
    limited = RunConfig(num_prompts=3, traffic=cfg.traffic)
    assert len(plan_rows(rows, limited, cfg.traffic)) == 3
    timed = RunConfig(duration_s=1.2, traffic=cfg.traffic)
    assert [p.row.t_s for p in plan_rows(rows, timed, cfg.traffic)] == [2.0, 3.0, 4.0]  # offsets < 1.2 s


def test_session_sampling_keeps_or_drops_whole_sessions(tmp_path: Path) -> None:
    path = _jsonl(
        tmp_path / "s.jsonl",
        [{"t": float(i), "input_len": 8, "output_len": 2, "session_id": f"s{i % 20}"} for i in range(200)],
    )
    workload = TraceWorkload(_config(path, seed=3, trace_sample=0.5, trace_sample_by="session"))
    kept = {p.row.session for p in workload.planned}
    assert 3 <= len(kept) <= 17  # about half of 20 sessions
    for session in kept:  # each kept session has all of its 10 requests
        assert sum(p.row.session == session for p in workload.planned) == 10
    by_request = TraceWorkload(_config(path, seed=3, trace_sample=0.5))
    assert 60 <= len(by_request.planned) <= 140
    assert len({p.row.session for p in by_request.planned}) == 20  # requests sampled across sessions


def test_the_same_seed_reproduces_the_sequence_and_schedule_fingerprints(tmp_path: Path) -> None:
    path = EXAMPLES / "mooncake-small.jsonl"
    one, two = TraceWorkload(_config(path, seed=7)), TraceWorkload(_config(path, seed=7))
    assert one.describe() == two.describe()
    assert one.schedule() == two.schedule()
    assert [one.request(i).canonical() for i in range(5)] == [two.request(i).canonical() for i in range(5)]
    other = TraceWorkload(_config(path, seed=8))
    assert other.describe()["request_sequence_sha256"] != one.describe()["request_sequence_sha256"]
    assert other.describe()["trace_sha256"] == one.describe()["trace_sha256"]  # the same file


def test_window_with_nothing_in_it_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no request left after the window"):
        TraceWorkload(_config(_rows(tmp_path), trace_start_s=50.0))


def test_format_time_unit_and_block_size_can_be_named(tmp_path: Path) -> None:
    # Mooncake-shaped rows whose timestamps are in seconds, with 64-token blocks
    path = _jsonl(
        tmp_path / "m.jsonl",
        [{"timestamp": t, "input_length": 100, "output_length": 2, "hash_ids": [1, 2]} for t in (0, 1.5)],
    )
    default = TraceWorkload(_config(path))
    assert (default.fmt, default.block_size, default.schedule()) == ("mooncake", 512, [0, 1_500_000])  # ms
    named = TraceWorkload(_config(path, trace_format="alibaba", trace_time_unit="s", trace_block_size=64))
    assert (named.fmt, named.block_size, named.schedule()) == ("alibaba", 64, [0, 1_500_000_000])
    # 100 tokens in 64-token blocks: block 1 whole, then 36 tokens of block 2
    assert named.request(0).prompt == list(block_tokens(42, 1, 64) + block_tokens(42, 2, 64)[:36])
    assert named.describe()["definition_fingerprint"] != default.describe()["definition_fingerprint"]
