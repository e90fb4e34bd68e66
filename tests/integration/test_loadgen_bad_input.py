"""Bad input through `loadgen run` (issue #11 items 13, 14, 19): one line naming the value, exit 2."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from aiohttp import web
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


def _models_app(status: int, body: bytes, content_type: str) -> Callable[[], web.Application]:
    async def models(request: web.Request) -> web.Response:
        return web.Response(status=status, body=body, content_type=content_type)

    def factory() -> web.Application:
        app = web.Application()
        app.router.add_get("/v1/models", models)
        return app

    return factory


@pytest.mark.parametrize(
    ("status", "body", "content_type", "message"),
    [
        (
            200,
            b"<html><body>welcome to nginx</body></html>",
            "text/html",
            "/v1/models answered '<html><body>welcome to nginx</body></html>', which is not an "
            "OpenAI-compatible response",
        ),
        (
            200,
            b'{"status": "ok"}',
            "application/json",
            "/v1/models answered '{\"status\": \"ok\"}' (no 'data' list of models), which is not an OpenAI",
        ),
        (500, b"Internal Server Error: CUDA OOM", "text/plain", "/v1/models answered HTTP 500 ('Internal"),
    ],
)
def test_item14_a_server_answering_garbage_or_500_is_named_not_unreachable(
    tmp_path: Path, status: int, body: bytes, content_type: str, message: str
) -> None:
    with ServerThread(_models_app(status, body, content_type)) as server:
        code, lines = _invoke(["run", "--target", "vllm", "--base-url", server.base_url], tmp_path)
    assert code == 2
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"Error: {server.base_url}/v1/models answered")
    assert message in lines[0]
    assert "cannot reach" not in lines[0]
    assert "lists no model" not in lines[0]
    assert not any(tmp_path.iterdir())


class NotHttpServer:
    """A real TCP server on 127.0.0.1 port 0 that answers every connection with non-HTTP bytes."""

    def __init__(self, reply: bytes) -> None:
        self.reply = reply
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = self.sock.accept()
                with conn:
                    conn.recv(65536)
                    conn.sendall(self.reply)

    def __enter__(self) -> NotHttpServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.sock.close()


def test_item14_a_non_http_answer_is_named(tmp_path: Path) -> None:
    with NotHttpServer(b"SSH-2.0-OpenSSH_9.6\r\n\r\n") as server:
        url = f"http://127.0.0.1:{server.port}"
        code, lines = _invoke(["run", "--target", "openai", "--base-url", url], tmp_path)
    assert code == 2
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"Error: {url}/v1/models answered with something that is not valid HTTP (")
    assert "which is not an OpenAI-compatible response" in lines[0]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--base-url", "http://127.0.0.1:99999"],
            "invalid base_url 'http://127.0.0.1:99999': port '99999' is not a number in 1-65535",
        ),
        (["--base-url", "http://h:http"], "invalid base_url 'http://h:http': port 'http' is not a number in"),
        (["--base-url", "http://:8000"], "invalid base_url 'http://:8000': no host"),
        (["--duration", "inf"], "invalid duration 'inf': not a finite time"),
        (["--request-timeout", "nan"], "invalid request timeout 'nan': not a finite time"),
        (["--duration", "-2s"], "invalid duration '-2s': must be > 0"),
    ],
)
def test_item14_bad_url_and_durations_are_named(tmp_path: Path, args: list[str], message: str) -> None:
    code, lines = _invoke(["run", "--target", "vllm", *args], tmp_path)
    assert code == 2
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"Error: {message}")
    assert "running?" not in lines[0]


@pytest.mark.parametrize(
    ("text", "where", "problem"),
    [
        ("rate: 10\nseed: [1, 2\nwarmup: 3\n", ":3:7:", "expected ',' or ']', but got ':'"),
        ("rate: 10\n  seed: 1\n", ":2:7:", "mapping values are not allowed here"),
        ("rate: 10\n\tseed: 1\n", ":2:1:", "found character '\\t' that cannot start any token"),
    ],
)
def test_item14_broken_config_yaml_names_line_and_column(
    tmp_path: Path, text: str, where: str, problem: str
) -> None:
    config = tmp_path / "run.yaml"
    config.write_text(text)
    results = tmp_path / "results"
    code, lines = _invoke(["run", "--config", str(config)], results)
    assert code == 2
    assert lines == [f"Error: {config}{where} invalid YAML ({problem})"]
    assert not results.exists()


def test_item13_sharegpt_system_turn_prefixes_the_completions_prompt(tmp_path: Path) -> None:
    path = tmp_path / "sharegpt.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(SHAREGPT_WITH_SYSTEM).encode() + b"\r\n\r\n")  # BOM, CRLF
    engine = FakeEngine(ttft_s=0.001, itl_s=0.0)
    with ServerThread(engine.app) as server:
        args = ["run", "--target", "openai", "--base-url", server.base_url, "--dataset", str(path)]
        code, _ = _invoke([*args, "--num-prompts", "1", "--linger", "0", "--quiet"], tmp_path / "results")
    assert code == 0
    assert [s.body["prompt"] for s in engine.streams] == ["you are terse\n\nwhy is the sky blue"]
    assert engine.streams[0].body["max_tokens"] == 1  # one reply word * 4/3, rounded


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (b"", "/v1/models closed the connection without an answer, which is not an OpenAI-compatible"),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            "/v1/models answered with something that is not valid HTTP (Invalid character in chunk size",
        ),
        (
            b'HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{"data"',
            "/v1/models answered a broken HTTP body (",
        ),
    ],
)
def test_item14_a_closed_or_broken_answer_is_named(tmp_path: Path, reply: bytes, message: str) -> None:
    with NotHttpServer(reply) as server:
        url = f"http://127.0.0.1:{server.port}"
        code, lines = _invoke(["run", "--target", "openai", "--base-url", url], tmp_path)
    assert code == 2
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"Error: {url}{message}")
