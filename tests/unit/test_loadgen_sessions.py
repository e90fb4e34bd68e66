"""Sessions, pure parts: each turn's prompt is the conversation so far (previous prompt, the answer
received, the new user part), planned sessions reproduce from the seed, think times, ShareGPT files,
and reading an answer out of a stamped stream."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from loadgen.config import ConfigError, RunConfig
from loadgen.records import RequestRecord
from loadgen.run.sessions import answer_of
from loadgen.workload.fidelity import session_facts
from loadgen.workload.sessions import build_synthetic, standin_ids
from loadgen.workload.sharegpt import ShareGPTWorkload, build_sharegpt_sessions, read_conversations
from loadgen.workload.thinktime import parse_think_time
from loadgen.workload.traffic_config import TrafficConfig

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sessions" / "sharegpt-multiturn.json"


def _synthetic(endpoint: str = "completions", seed: int = 42, **traffic: object) -> RunConfig:
    return RunConfig(
        seed=seed,
        endpoint=endpoint,
        num_prompts=5,
        rate=2.0,
        input_len="fixed:8",
        output_len="fixed:4",
        traffic=TrafficConfig(sessions="synthetic", session_turns="fixed:3", **traffic),  # type: ignore[arg-type]
    )


def test_completions_turn_k_plus_1_holds_turn_k_prompt_and_answer_ids() -> None:
    workload = build_synthetic(_synthetic())
    conv = workload.conversation(workload.plans[0])
    first = conv.request(0)
    assert isinstance(first.prompt, list)
    assert len(first.prompt) == 8
    conv.answered(" tok0 tok1", [11, 12, 13, 14])  # the engine streamed its token ids
    second = conv.request(1)
    assert isinstance(second.prompt, list)
    assert second.prompt[:12] == first.prompt + [11, 12, 13, 14]
    assert second.prompt[12:] == list(workload.plans[0].turns[1].user)
    assert second.input_len == len(second.prompt) == 20  # 8 + 4 answer + 8 new
    assert second.index == first.index + 1
    conv.answered(" tok0 tok1", None)  # no ids from the engine: the stand-in ids of the text
    third = conv.request(2)
    assert isinstance(third.prompt, list)
    assert third.prompt[: 20 + len(standin_ids(" tok0 tok1"))] == second.prompt + standin_ids(" tok0 tok1")


def test_chat_turn_k_plus_1_holds_turn_k_messages_and_answer() -> None:
    workload = build_synthetic(_synthetic("chat"))
    conv = workload.conversation(workload.plans[1])
    first = conv.request(0)
    conv.answered("the answer", None)
    second = conv.request(1)
    assert first.messages is not None
    assert second.messages is not None
    assert second.messages[: len(first.messages)] == first.messages
    assert second.messages[len(first.messages)] == {"role": "assistant", "content": "the answer"}
    assert second.messages[-1]["role"] == "user"
    assert len(second.messages) == 3


def test_sessions_reproduce_from_the_seed() -> None:
    one, two = build_synthetic(_synthetic(seed=5)), build_synthetic(_synthetic(seed=5))
    assert one.describe() == two.describe()
    assert one.schedule() == two.schedule()
    assert len(one.schedule()) == one.total_turns == 15  # 5 sessions x 3 turns
    other = build_synthetic(_synthetic(seed=6))
    assert other.describe()["request_sequence_sha256"] != one.describe()["request_sequence_sha256"]


def test_arrivals_are_open_loop_and_think_times_planned() -> None:
    workload = build_synthetic(_synthetic(think_time="uniform:1s-2s"))
    arrivals = [p.arrival_ns for p in workload.plans]
    assert arrivals[0] == 0
    assert arrivals == sorted(arrivals)
    for plan in workload.plans:
        assert plan.turns[0].think_s == 0.0  # the first turn goes at the session's arrival
        assert all(1.0 <= t.think_s <= 2.0 for t in plan.turns[1:])


@pytest.mark.parametrize(
    ("spec", "kind", "a", "b"),
    [("2s", "fixed", 2.0, 0.0), ("fixed:0", "fixed", 0.0, 0.0), ("uniform:500ms-1.5s", "uniform", 0.5, 1.5),
     ("exponential:3", "exponential", 3.0, 0.0)],
)  # fmt: skip
def test_think_time_specs(spec: str, kind: str, a: float, b: float) -> None:
    think = parse_think_time(spec)
    assert (think.kind, think.a, think.b) == (kind, a, b)
    assert think.sample(random.Random(1)) >= 0


@pytest.mark.parametrize("spec", ["normal:1", "uniform:3-1", "uniform:2", "fixed:soon", "exponential:0"])
def test_bad_think_time_is_one_line(spec: str) -> None:
    with pytest.raises(ConfigError, match=r"invalid --think-time"):
        parse_think_time(spec)


def test_answer_of_reads_text_and_token_ids_of_completions_and_chat() -> None:
    completions = [
        (1, b'data: {"choices":[{"text":" a","token_ids":[5]}]}\n\n'
            b'data: {"choices":[{"text":" b","token_ids":[6]}]}\n\n'),
        (2, b'data: {"choices":[],"usage":{"completion_tokens":2}}\n\ndata: [DONE]\n\n'),
    ]  # fmt: skip
    assert answer_of(completions) == (" a b", [5, 6])
    chat = [(1, b'data: {"choices":[{"delta":{"role":"assistant","content":""}}]}\n\n'
                b'data: {"choices":[{"delta":{"content":"Hi"}}]}\n\ndata: [DONE]\n\n')]  # fmt: skip
    assert answer_of(chat) == ("Hi", None)


def test_sharegpt_multi_turn_file_gives_one_session_per_conversation() -> None:
    conversations, sha = read_conversations(str(EXAMPLE))
    assert sha.startswith("sha256:")
    config = RunConfig(endpoint="chat", num_prompts=3, traffic=TrafficConfig(sessions=str(EXAMPLE)))
    workload = build_sharegpt_sessions(config)
    assert len(workload.plans) == 3
    by_id = dict(conversations)
    for plan in workload.plans:
        pairs = by_id[plan.session_id.split("#")[0]]
        assert [t.user for t in plan.turns] == [human for human, _ in pairs]
        # no tokenizer: the reply's words x 4/3 size the answer
        assert plan.turns[0].output_len == max(1, round(len(str(pairs[0][1]).split()) * 4 / 3))


def test_sharegpt_single_turn_and_a_missing_tokenizer_package(tmp_path: Path) -> None:
    data = [{"id": "a", "conversations": [{"from": "human", "value": "one two three"},
                                          {"from": "gpt", "value": "four five six"}]}]  # fmt: skip
    path = tmp_path / "sg.json"
    path.write_text(json.dumps(data))
    workload = ShareGPTWorkload(RunConfig(traffic=TrafficConfig(sharegpt=str(path), sharegpt_output_len=7)))
    spec = workload.request(3)  # cycled
    assert (spec.prompt, spec.output_len, spec.input_len) == ("one two three", 7, 4)
    (tmp_path / "tok").mkdir()
    with pytest.raises(ConfigError, match=r"--tokenizer .* needs the 'tokenizers' package"):
        ShareGPTWorkload(
            RunConfig(traffic=TrafficConfig(sharegpt=str(path), tokenizer=str(tmp_path / "tok")))
        )


def test_bad_sharegpt_file_names_the_item(tmp_path: Path) -> None:
    path = tmp_path / "sg.json"
    path.write_text(json.dumps([{"id": "a", "conversations": "nope"}]))
    with pytest.raises(
        ConfigError, match=r"sg\.json: item 0: expected an object with a 'conversations' list"
    ):
        read_conversations(str(path))


def _turn(session: str, turn: int, sent: int, first: int, last: int, outcome: str = "ok") -> RequestRecord:
    r = RequestRecord(
        turn, "x", False, sent, 8, 4, sent_ns=sent, first_ns=first, last_ns=last, outcome=outcome
    )
    r.session_id, r.turn_index = session, turn
    return r


def test_session_facts_ttft_by_turn_and_duration() -> None:
    ns = 1_000_000_000
    records = [
        _turn("a", 0, 0, ns // 10, ns), _turn("a", 1, 2 * ns, 2 * ns + ns // 20, 3 * ns),
        _turn("b", 0, 0, ns // 5, ns), _turn("b", 1, 2 * ns, 2 * ns, 3 * ns, outcome="http_error"),
    ]  # fmt: skip
    facts = session_facts(records)
    assert facts["sessions"] == 2
    assert facts["sessions_complete"] == 1  # b's second turn failed
    assert facts["ttft_by_turn_s"]["0"]["mean"] == pytest.approx(0.15)  # (0.1 + 0.2) / 2
    assert facts["ttft_by_turn_s"]["1"]["count"] == 1  # the failed turn has no TTFT
    assert facts["session_duration_s"]["max"] == pytest.approx(3.0)  # a: last token 3 s - first send 0
