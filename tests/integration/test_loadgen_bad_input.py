"""Bad input through `loadgen run` (issue #11 items 13, 14, 19): one line naming the value, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from loadgen.cli.main import cli
from tests.loadgen_servers import FakeEngine, ServerThread

pytestmark = pytest.mark.timeout(60)

SHAREGPT_WITH_SYSTEM = {
    "conversations": [
        {"from": "system", "value": "you are terse"},
        {"from": "human", "value": "why is the sky blue"},
        {"from": "gpt", "value": "scattering"},
    ]
}


def _invoke(args: list[str], results: Path) -> tuple[int, list[str]]:
    result = CliRunner().invoke(cli, [*args, "--results-dir", str(results), "--metrics-port", "0"])
    return result.exit_code, [line for line in result.output.splitlines() if line.strip()]


def _dataset(tmp_path: Path, lines: list[bytes]) -> Path:
    path = tmp_path / "data.jsonl"
    path.write_bytes(b"\n".join([b'{"prompt": "a fine first line"}', *lines]) + b"\n")
    return path


@pytest.mark.parametrize(
    ("line", "endpoint", "message"),
    [
        (b'{"prompt": "caf\xe9"}', "completions", ":2: not UTF-8 (byte 0xe9 at column 16)"),
        (b'{"prompt": "x",', "completions", ":2: invalid JSON (Expecting property name"),
        (b'{"messages": "x"}', "chat", ":2: field 'messages' must be a non-empty list"),
        (b'{"messages": [{"role": "user", "content": 5}]}', "chat", ":2: field 'messages[0].content'"),
        (b'{"prompt": "x", "output_len": "many"}', "completions", ":2: field 'output_len' must be an"),
        (
            b'{"prompt": "x", "output_len": -3}',
            "completions",
            "field 'output_len' must be an integer >= 1, got int -3",
        ),
        (
            b'{"prompt": "x", "max_tokens": 0}',
            "completions",
            "field 'max_tokens' must be an integer >= 1, got int 0",
        ),
        (b'{"prompt": 5}', "completions", ":2: field 'prompt' must be non-empty text or a list of token ids"),
        (b'{"prompt": [1, "a"]}', "completions", "got list [1, 'a']"),
        (b'{"prompt": [1, 2]}', "chat", ":2: field 'prompt' holds token ids, which --endpoint chat cannot"),
        (b'{"messages": [{"role": "user", "content": "hi"}]}', "completions", "(pass --endpoint chat)"),
        (
            b'{"conversations": [{"from": "gpt", "value": "hi"}]}',
            "completions",
            "has no non-empty human turn",
        ),
        (b"[1, 2]", "completions", ":2: expected a JSON object per line, got list [1, 2]"),
        (b'{"text": "x"}', "completions", ":2: expected a 'prompt', 'messages' or 'conversations' key"),
    ],
)
def test_item13_bad_dataset_line_is_one_line_exit_2_nothing_recorded(
    tmp_path: Path, line: bytes, endpoint: str, message: str
) -> None:
    path = _dataset(tmp_path, [line])
    results = tmp_path / "results"
    args = ["run", "--target", "sim", "--workload", "jsonl", "--dataset", str(path), "--endpoint", endpoint]
    code, lines = _invoke(args, results)
    assert code == 2
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"Error: {path}:2: ")
    assert message in lines[0]
    assert not results.exists() or not any(results.iterdir())


def test_item13_sharegpt_system_turn_is_sent_as_a_system_message(tmp_path: Path) -> None:
    path = tmp_path / "sharegpt.jsonl"
    path.write_text(json.dumps(SHAREGPT_WITH_SYSTEM) + "\n")
    engine = FakeEngine(ttft_s=0.001, itl_s=0.0)
    with ServerThread(engine.app) as server:
        args = ["run", "--target", "openai", "--base-url", server.base_url, "--endpoint", "chat"]
        args += ["--dataset", str(path), "--num-prompts", "2", "--linger", "0", "--quiet"]
        code, _ = _invoke(args, tmp_path / "results")
    assert code == 0
    assert [s.body["messages"] for s in engine.streams] == 2 * [
        [{"role": "system", "content": "you are terse"}, {"role": "user", "content": "why is the sky blue"}]
    ]
