"""ShareGPT-format files (a JSON array, or JSONL, of `{"id", "conversations": [{"from", "value"}]}`).

Single-turn (`--dataset-name sharegpt --dataset-path F`): the first human turn is the prompt and the
reply after it sizes the output (as `vllm bench serve`: its token count, or `--sharegpt-output-len`);
conversations are taken in a seeded shuffle, cycled when more are asked for. Multi-turn
(`--sessions F`): every human turn is one turn of a session, each followed by the reply that sizes
its answer. Lengths are measured with `--tokenizer DIR` when given (and the manifest says so), else
estimated as 4/3 tokens a word.
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path
from typing import Any

from loadgen.config import ConfigError, RunConfig
from loadgen.workload.dataset import SHAREGPT_HUMAN, SHAREGPT_REPLY, WORDS_PER_TOKEN
from loadgen.workload.generator import RequestSpec, definition_fingerprint
from loadgen.workload.sessions import SessionPlan, SessionWorkload, Turn, arrivals
from loadgen.workload.thinktime import parse_think_time
from loadgen.workload.tokenizer import Encode, load_tokenizer

Pair = tuple[str, str | None]  # (human text, the reply after it, if any)


def _items(text: str, name: str) -> list[tuple[str, Any]]:
    """(where, item) of a JSON array or of JSON lines."""
    stripped = text.lstrip("\ufeff").lstrip()
    if stripped.startswith("["):
        try:
            data = json.loads(stripped)
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f"{name}:{exc.lineno}: invalid JSON ({exc.msg} at column {exc.colno})"
            ) from None
        return [(f"{name}: item {i}", item) for i, item in enumerate(data)]
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                out.append((f"{name}:{number}", json.loads(line)))
            except json.JSONDecodeError as exc:
                raise ConfigError(
                    f"{name}:{number}: invalid JSON ({exc.msg} at column {exc.colno})"
                ) from None
    return out


def _pairs(item: Any, where: str) -> list[Pair]:
    """The (human, reply) pairs of one conversation, in order."""
    turns = item.get("conversations") if isinstance(item, dict) else None
    if not isinstance(turns, list):
        raise ConfigError(f"{where}: expected an object with a 'conversations' list")
    pairs: list[Pair] = []
    for i, turn in enumerate(turns):
        if not isinstance(turn, dict) or not isinstance(turn.get("value"), str):
            raise ConfigError(f"{where}: 'conversations[{i}]' needs 'from' and a string 'value'")
        who = str(turn.get("from", "")).lower()
        if who in SHAREGPT_HUMAN and turn["value"].strip():
            pairs.append((turn["value"], None))
        elif who in SHAREGPT_REPLY and pairs and pairs[-1][1] is None:
            pairs[-1] = (pairs[-1][0], turn["value"])
    return pairs


def read_conversations(path: str) -> tuple[list[tuple[str, list[Pair]]], str]:
    """(conversation id, pairs) of every conversation with a human turn, and the file's sha256."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read ShareGPT file {path!r}: {exc.strerror}") from None
    out = []
    for i, (where, item) in enumerate(_items(data.decode("utf-8", errors="replace"), path)):
        pairs = _pairs(item, where)
        if pairs:
            out.append((str(item.get("id", i)), pairs))
    if not out:
        raise ConfigError(f"ShareGPT file {path!r} has no conversation with a human turn")
    return out, f"sha256:{hashlib.sha256(data).hexdigest()}"


ENGINE_TOKENIZER = "engine"  # `--tokenizer engine`: the engine's /tokenize, asked before the run


class Lengths:
    """Token counts of text: measured with the tokenizer when there is one (a local one, or the
    engine's /tokenize whose counts `counts` holds once measured), else estimated."""

    def __init__(self, tokenizer: str | None) -> None:
        self.from_engine = tokenizer == ENGINE_TOKENIZER
        local = tokenizer if tokenizer and not self.from_engine else None
        self.encode: Encode | None = load_tokenizer(local) if local else None
        self.counts: dict[str, int] = {}
        self.source = "estimated (4/3 tokens a word)"
        if tokenizer:
            self.source = "engine /tokenize" if self.from_engine else f"tokenizer {tokenizer}"

    @property
    def measured(self) -> bool:
        """Whether lengths are measured (a local tokenizer, or the engine's counts), not estimated."""
        return self.encode is not None or self.from_engine

    def of(self, text: str) -> int:
        """Tokens of `text` (at least 1)."""
        if text in self.counts:
            return max(1, self.counts[text])
        if self.encode is not None:
            return max(1, len(self.encode(text)))
        return max(1, round(len(text.split()) / WORDS_PER_TOKEN))


class ShareGPTWorkload:
    """Single-turn ShareGPT requests (see the module docstring)."""

    def __init__(self, config: RunConfig) -> None:
        traffic = config.traffic
        assert traffic is not None
        assert traffic.sharegpt is not None
        self.name, self.seed, self.path = "sharegpt", config.seed, traffic.sharegpt
        self.sets_lengths = True  # the file's (or --sharegpt-output-len)
        self.fixed_out = traffic.sharegpt_output_len
        conversations, self.sha256 = read_conversations(self.path)
        random.Random(config.seed).shuffle(conversations)
        self.lengths = Lengths(traffic.tokenizer)
        self.prompts = [(pairs[0][0], pairs[0][1]) for _, pairs in conversations]
        self.as_chat = config.endpoint == "chat"

    def request(self, index: int) -> RequestSpec:
        """The index-th request: conversation `index % n` of the shuffle."""
        prompt, reply = self.prompts[index % len(self.prompts)]
        n_out = self.fixed_out or (self.lengths.of(reply) if reply else 128)
        exact = self.lengths.measured
        if self.as_chat:
            messages = [{"role": "user", "content": prompt}]
            return RequestSpec(
                index, prompt, self.lengths.of(prompt), n_out, messages=messages, input_len_exact=exact
            )
        return RequestSpec(index, prompt, self.lengths.of(prompt), n_out, input_len_exact=exact)

    def clip_to_model_len(self, max_model_len: int | None) -> None:
        """A dataset is sent as written."""

    def texts_to_measure(self) -> list[str]:
        """The texts whose lengths the engine's /tokenize should count (`--tokenizer engine`)."""
        if not self.lengths.from_engine:
            return []
        return sorted({t for prompt, reply in self.prompts for t in (prompt, reply) if t})

    def use_counts(self, counts: dict[str, int]) -> None:
        """The engine's token counts of `texts_to_measure`."""
        self.lengths.counts.update(counts)

    def describe(self) -> dict[str, Any]:
        """Workload facts for the manifest."""
        out = {
            "name": "sharegpt",
            "dataset": self.path,
            "dataset_sha256": self.sha256,
            "conversations": len(self.prompts),
            "lengths": self.lengths.source,
            "output_len": self.fixed_out,
            "seed": self.seed,
        }
        definition = definition_fingerprint({k: v for k, v in out.items() if k != "dataset"})
        return {**out, "definition_fingerprint": definition}


def _plans(
    config: RunConfig, conversations: list[tuple[str, list[Pair]]], lengths: Lengths
) -> list[SessionPlan]:
    """One session per conversation, cycled up to `--num-prompts`, arriving open-loop."""
    traffic = config.traffic
    assert traffic is not None
    think = parse_think_time(traffic.think_time)
    plans, first = [], 0
    for s, arrival in enumerate(arrivals(config, config.num_prompts or len(conversations))):
        conv_id, pairs = conversations[s % len(conversations)]
        rng = random.Random(f"{config.seed}:session:{s}")
        turns = tuple(
            Turn(
                user,
                traffic.sharegpt_output_len or (lengths.of(reply) if reply else 128),
                think.sample(rng) if k else 0.0,
            )
            for k, (user, reply) in enumerate(pairs)
        )
        plans.append(SessionPlan(f"{conv_id}#{s}", arrival, turns, first))
        first += len(turns)
    return plans


class ShareGPTSessions(SessionWorkload):
    """Sessions of a ShareGPT file; with `--tokenizer engine` re-planned once the engine has counted."""

    def __init__(self, config: RunConfig, conversations: list[tuple[str, list[Pair]]], sha: str) -> None:
        traffic = config.traffic
        assert traffic is not None
        assert traffic.sessions is not None
        self.config, self.conversations, self.lengths = config, conversations, Lengths(traffic.tokenizer)
        facts = {
            "name": "sessions",
            "source": "sharegpt",
            "dataset": traffic.sessions,
            "dataset_sha256": sha,
            "lengths": self.lengths.source,
            "prompt_kind": "text",
        }
        super().__init__(config, _plans(config, conversations, self.lengths), facts)

    def texts_to_measure(self) -> list[str]:
        """The replies that size the answers (`--tokenizer engine`)."""
        if not self.lengths.from_engine:
            return []
        return sorted({reply for _, pairs in self.conversations for _, reply in pairs if reply})

    def use_counts(self, counts: dict[str, int]) -> None:
        """The engine's counts: the sessions are planned again with them."""
        self.lengths.counts.update(counts)
        self.plans = _plans(self.config, self.conversations, self.lengths)


def build_sharegpt_sessions(config: RunConfig) -> SessionWorkload:
    """Multi-turn sessions from a ShareGPT file: one session per conversation (seeded shuffle,
    cycled up to `--num-prompts` sessions), arriving open-loop."""
    assert config.traffic is not None
    assert config.traffic.sessions is not None
    conversations, sha = read_conversations(config.traffic.sessions)
    random.Random(config.seed).shuffle(conversations)
    return ShareGPTSessions(config, conversations, sha)
