"""Each target's request shape, and the registry."""

from __future__ import annotations

import pytest

from loadgen.config import target_names
from loadgen.targets import get_target, targets
from loadgen.workload.generator import RequestSpec

TOKENS = RequestSpec(0, [101, 102, 103], 3, 7)
TEXT = RequestSpec(1, "hello world", 2, 5, system="you are terse", input_len_exact=False)


def test_registry_has_one_preset_per_engine_plus_openai_and_sim_and_rejects_others() -> None:
    assert list(targets()) == ["vllm", "sglang", "llamacpp", "openai", "sim"]
    assert target_names() == tuple(targets())  # the config's list and the classes are one list
    assert get_target("vllm").default_base_url == "http://127.0.0.1:8000"
    assert get_target("sglang").default_base_url == "http://127.0.0.1:30000"
    assert get_target("llamacpp").default_base_url == "http://127.0.0.1:8080"
    assert get_target("llamacpp").hint == "is llama.cpp running? try --target sim"
    assert get_target("openai").default_base_url is None
    expected = "unknown target 'tgi'; choose from vllm, sglang, llamacpp, openai, sim"
    with pytest.raises(ValueError, match=expected):
        get_target("tgi")


@pytest.mark.parametrize("name", ["vllm", "sglang", "llamacpp", "sim"])
def test_engine_targets_send_token_ids_with_ignore_eos(name: str) -> None:
    path, body = get_target(name).build_payload(TOKENS, model="m", endpoint="completions", ignore_eos=True)
    assert path == "/v1/completions"
    assert body == {
        "model": "m",
        "prompt": [101, 102, 103],
        "max_tokens": 7,
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": 0.0,
        "ignore_eos": True,
    }


def test_openai_target_sends_only_standard_fields() -> None:
    _, body = get_target("openai").build_payload(TOKENS, model="m", endpoint="completions", ignore_eos=True)
    assert "ignore_eos" not in body
    _, body = get_target("vllm").build_payload(TOKENS, model="m", endpoint="completions", ignore_eos=False)
    assert "ignore_eos" not in body


def test_chat_shape_with_system_prompt() -> None:
    path, body = get_target("sglang").build_payload(TEXT, model="m", endpoint="chat", ignore_eos=True)
    assert path == "/v1/chat/completions"
    assert body["messages"] == [
        {"role": "system", "content": "you are terse"},
        {"role": "user", "content": "hello world"},
    ]
    assert body["max_tokens"] == 5
    assert "prompt" not in body


def test_text_completion_prepends_the_shared_prefix() -> None:
    _, body = get_target("vllm").build_payload(TEXT, model="m", endpoint="completions", ignore_eos=True)
    assert body["prompt"] == "you are terse\n\nhello world"
