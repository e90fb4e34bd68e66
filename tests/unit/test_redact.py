"""Secrets never reach logs, labels or manifests: command lines, arg dicts, env vars, URLs."""

from __future__ import annotations

import json

from exporter.discovery import ProcInfo
from exporter.engine_http import EngineHttpFacts
from exporter.engines import EngineInspector
from infergauge.engines.params import parse_cmdline
from infergauge.redact import REDACTED, is_secret_name, redact, redact_argv, redact_mapping, redact_url


def test_secret_names() -> None:
    for name in (
        "--api-key",
        "api_key",
        "HF_TOKEN",
        "OPENAI_API_KEY",
        "--admin-api-key",
        "VLLM_API_KEY",
        "--ssl-keyfile-password",
        "HUGGING_FACE_HUB_TOKEN",
        "AWS_SECRET_ACCESS_KEY",
        "db_passwd",
        "auth_header",
        "--bearer",
        "key_path",
        "--api-keys",
        "api_keys",
        "credentials",
    ):
        assert is_secret_name(name), name
    for name in (
        "--max-num-batched-tokens",
        "--tokenizer",
        "--ssl-keyfile",
        "CUDA_VISIBLE_DEVICES",
        "--kv-cache-dtype",
        "prompt_tokens",
        "max_num_batched_tokens",
        "--served-model-name",
    ):
        assert not is_secret_name(name), name


def test_argv_both_spellings() -> None:
    argv = ["vllm", "serve", "m", "--api-key", "sk-123", "--hf-token=hf_abc", "--max-num-seqs", "8"]
    assert redact_argv(argv) == [
        "vllm",
        "serve",
        "m",
        "--api-key",
        REDACTED,
        f"--hf-token={REDACTED}",
        "--max-num-seqs",
        "8",
    ]


def test_mapping_and_urls() -> None:
    env = {
        "HF_TOKEN": "hf_x",
        "CUDA_VISIBLE_DEVICES": "0,1",
        "VLLM_API_KEY": "k",
        "HF_ENDPOINT": "https://user:pw@mirror.example/hf",
    }
    out = redact_mapping(env)
    assert out["HF_TOKEN"] == REDACTED
    assert out["VLLM_API_KEY"] == REDACTED
    assert out["CUDA_VISIBLE_DEVICES"] == "0,1"
    assert out["HF_ENDPOINT"] == f"https://{REDACTED}@mirror.example/hf"
    assert (
        redact_url("see http://a:b@h:1/x and https://h/y") == f"see http://{REDACTED}@h:1/x and https://h/y"
    )


def test_parsed_args_redacted() -> None:
    _, args = parse_cmdline(
        ["python", "-m", "sglang.launch_server", "--api-key", "s3cret", "--admin-api-key", "adm"]
    )
    out = redact_mapping(args)
    assert out["api_key"] == REDACTED
    assert out["admin_api_key"] == REDACTED


def test_engine_report_carries_no_secret() -> None:
    argv = ("vllm", "serve", "m", "--api-key", "sk-live-123", "--port", "1")
    inspector = EngineInspector(
        http_timeout_s=0.2,
        api_key="sk-live-123",
        read_procs=lambda: [ProcInfo(10, 1, argv)],
        ports_of=lambda pid: [],
        read_env=lambda pid: {"HF_TOKEN": "hf_secret", "CUDA_VISIBLE_DEVICES": "0"},
        ask_interpreter=lambda pid, engine: "0.26.0",
        poll=lambda url, timeout, key: EngineHttpFacts(url=url, up=True),
    )
    dumped = json.dumps([r.as_dict() for r in inspector.reports()])
    assert "sk-live-123" not in dumped
    assert "hf_secret" not in dumped
    assert REDACTED in dumped
    assert '"CUDA_VISIBLE_DEVICES": "0"' in dumped


def test_multi_value_and_plural_flags_hide_every_value() -> None:
    argv = ["vllm", "serve", "m", "--api-key", "k1", "k2", "--api-keys", "k3", "--port", "8000"]
    out = redact_argv(argv)
    assert not {"k1", "k2", "k3"} & set(out)
    assert out[-2:] == ["--port", "8000"]


def test_nested_values_are_redacted_at_any_depth() -> None:
    body = {"server_args": {"api_key": "k", "db_passwd": "p"}, "urls": ["http://u:pw@h/"], "n": 3}
    out = redact(body)
    assert out["server_args"] == {"api_key": REDACTED, "db_passwd": REDACTED}
    assert out["urls"] == [f"http://{REDACTED}@h/"]
    assert out["n"] == 3
