"""Multi-turn sessions: ordered turns whose prompt is the conversation so far plus a new user part.

A session's turns are planned up front from the seed (user parts, answer lengths, think times);
what the engine answers is only known during the run, so `Conversation` builds each turn's
request from the previous prompt, the answer actually received and the new user part:
- chat: messages (`user`, `assistant` with the streamed text, ..., the new `user`);
- completions with token ids: previous prompt ids + the answer's ids + the new user part's ids;
- completions with text (ShareGPT): previous prompt text + the answer text + the new user text.
Sessions arrive open-loop (`--rate` sessions/s with `--arrival`); turns are closed-loop: turn k+1 is
due its think time after turn k's answer ended. `--num-prompts` counts sessions.
"""

from __future__ import annotations

import hashlib
import random
import re
import zlib
from dataclasses import dataclass, field
from typing import Any

from loadgen.config import ConfigError, RunConfig
from loadgen.workload.distributions import SpecError, parse_length
from loadgen.workload.generator import (
    TOKEN_ID_HIGH,
    TOKEN_ID_LOW,
    WORDS,
    RequestSpec,
    definition_fingerprint,
)
from loadgen.workload.schedule import send_offsets
from loadgen.workload.thinktime import ThinkTime, parse_think_time

_TOKEN_IDS = range(TOKEN_ID_LOW, TOKEN_ID_HIGH + 1)
_PIECE = re.compile(r"\s?\w{1,4}|\s?[^\w\s]|\s+")
TURN_SEPARATOR = "\n\n"  # between the parts of a text conversation on the completions endpoint


@dataclass(frozen=True)
class Turn:
    """One planned turn: the new user part, the answer length asked for, the think time before it.

    A turn of a trace session carries its whole prompt (`whole`: the trace's hash-id blocks stand for
    the conversation it recorded) and its recorded send offset `at_ns`: it is due then, or as soon as
    the previous answer has ended when that is later."""

    user: list[int] | str
    output_len: int
    think_s: float = 0.0
    at_ns: int | None = None
    whole: bool = False


@dataclass(frozen=True)
class SessionPlan:
    """A session: its id, arrival offset (ns after the run's start) and turns in order."""

    session_id: str
    arrival_ns: int
    turns: tuple[Turn, ...]
    first_index: int  # the global request index of its turn 0 (turn k is first_index + k)


def standin_ids(text: str) -> list[int]:
    """Token ids for text when neither the engine nor a tokenizer gives them: one id per word piece
    (at most 4 characters, about a BPE token), stable across runs; approximate, not the model's."""
    span = TOKEN_ID_HIGH - TOKEN_ID_LOW + 1
    return [TOKEN_ID_LOW + zlib.crc32(p.encode()) % span for p in _PIECE.findall(text)] or [TOKEN_ID_LOW]


@dataclass
class Conversation:
    """The conversation so far of one running session (see the module docstring)."""

    plan: SessionPlan
    as_chat: bool
    messages: list[dict[str, Any]] = field(default_factory=list)
    prompt: list[int] | str | None = None

    def request(self, turn: int) -> RequestSpec:
        """Turn `turn`'s request: the conversation so far plus the new user part."""
        part = self.plan.turns[turn]
        index = self.plan.first_index + turn
        if self.as_chat:
            text = part.user if isinstance(part.user, str) else " ".join(map(str, part.user))
            self.messages.append({"role": "user", "content": text})
            words = sum(len(str(m["content"]).split()) for m in self.messages)
            return RequestSpec(
                index, "", words, part.output_len, messages=list(self.messages), input_len_exact=False
            )
        if part.whole:
            self.prompt = part.user
            return RequestSpec(index, part.user, len(part.user), part.output_len)
        if isinstance(part.user, list):
            prev = self.prompt if isinstance(self.prompt, list) else []
            self.prompt = prev + part.user
            return RequestSpec(index, self.prompt, len(self.prompt), part.output_len)
        prev_text = self.prompt if isinstance(self.prompt, str) else ""
        self.prompt = prev_text + part.user if not prev_text else prev_text + TURN_SEPARATOR + part.user
        return RequestSpec(
            index, self.prompt, len(self.prompt.split()), part.output_len, input_len_exact=False
        )

    def answered(self, text: str, token_ids: list[int] | None) -> None:
        """The engine's answer to the last turn joins the conversation."""
        if self.as_chat:
            self.messages.append({"role": "assistant", "content": text})
        elif isinstance(self.prompt, list):
            self.prompt = self.prompt + (token_ids if token_ids else standin_ids(text))
        else:
            self.prompt = (self.prompt or "") + text


class SessionWorkload:
    """Planned sessions (synthetic or from a ShareGPT file) and their conversations."""

    def __init__(self, config: RunConfig, plans: list[SessionPlan], facts: dict[str, Any]) -> None:
        self.name, self.seed, self.plans, self.facts = "sessions", config.seed, plans, facts
        self.sets_lengths = facts.get("source") != "synthetic"  # a file's or a trace's, not the flags'
        self.as_chat = config.endpoint == "chat"
        self.max_concurrency = config.max_concurrency
        self.think = parse_think_time(config.traffic.think_time if config.traffic else "fixed:0")

    @property
    def total_turns(self) -> int:
        """Requests of the whole run (every turn of every session)."""
        return sum(len(p.turns) for p in self.plans)

    def schedule(self) -> list[int]:
        """One offset per turn: its session's arrival (later turns are due when their previous answer
        ends, so this is their earliest time); the run's progress counts turns."""
        return [p.arrival_ns for p in self.plans for _ in p.turns]

    def conversation(self, plan: SessionPlan) -> Conversation:
        """A fresh conversation of one session."""
        return Conversation(plan, self.as_chat)

    def request(self, index: int) -> RequestSpec:
        """Turn 0 of the session whose first index this is (for `sharded` and previews only)."""
        plan = next(p for p in self.plans if p.first_index <= index < p.first_index + len(p.turns))
        return self.conversation(plan).request(0)

    def clip_to_model_len(self, max_model_len: int | None) -> None:
        """Conversations grow with the answers: lengths are not clipped (the engine rejects what is
        too long, and that turn's failure ends its session)."""

    def sequence_sha256(self) -> str:
        """sha256 over every session's id, arrival and planned turns (the engine's answers excluded)."""
        digest = hashlib.sha256()
        for p in self.plans:
            turns = [(t.user, t.output_len, t.think_s, t.at_ns) for t in p.turns]
            digest.update(f"{p.session_id}\t{p.arrival_ns}\t{turns}\n".encode())
        return f"sha256:{digest.hexdigest()}"

    def describe(self) -> dict[str, Any]:
        """Workload facts for the manifest, with the planned sequence's fingerprint."""
        out = {
            **self.facts,
            "seed": self.seed,
            "sessions": len(self.plans),
            "turns": self.total_turns,
            "think_time": str(self.think),
            "prompt_kind": "messages" if self.as_chat else self.facts.get("prompt_kind", "token_ids"),
            "request_sequence_sha256": self.sequence_sha256(),
        }
        return {**out, "definition_fingerprint": definition_fingerprint(out)}


def _parse(spec: str, what: str) -> Any:
    try:
        return parse_length(spec)
    except SpecError as exc:
        raise ConfigError(f"invalid {what}: {exc}") from None


def arrivals(config: RunConfig, count: int) -> list[int]:
    """Open-loop session arrival offsets (ns): `--rate` sessions/s with `--arrival`, seeded."""
    rate = config.traffic.session_rate if config.traffic and config.traffic.session_rate else config.rate
    stream = send_offsets(rate, config.arrival, config.burstiness, config.seed)
    return [next(stream) for _ in range(count)]


def synthetic_plans(config: RunConfig, think: ThinkTime) -> list[SessionPlan]:
    """Seeded sessions: turns from `--session-turns`, user parts from `--input-len`, answers from
    `--output-len`, think time from `--think-time`; each session drawn from its own RNG."""
    assert config.traffic is not None
    turns_dist = _parse(config.traffic.session_turns, "--session-turns")
    in_dist, out_dist = (parse_length(s) for s in config.lengths)
    count = config.num_prompts or 100
    as_text = config.endpoint == "chat"
    plans, first = [], 0
    for s, arrival in enumerate(arrivals(config, count)):
        rng = random.Random(f"{config.seed}:session:{s}")
        turns = []
        for k in range(turns_dist.sample(rng)):
            n_in, n_out = in_dist.sample(rng), out_dist.sample(rng)
            user: list[int] | str = (
                " ".join(rng.choices(WORDS, k=n_in)) if as_text else rng.choices(_TOKEN_IDS, k=n_in)
            )
            turns.append(Turn(user, n_out, think.sample(rng) if k else 0.0))
        plans.append(SessionPlan(f"s{s:05d}", arrival, tuple(turns), first))
        first += len(turns)
    return plans


def build_synthetic(config: RunConfig) -> SessionWorkload:
    """The synthetic session workload of the config."""
    assert config.traffic is not None
    think = parse_think_time(config.traffic.think_time)
    facts = {
        "name": "sessions",
        "source": "synthetic",
        "session_turns": config.traffic.session_turns,
        "user_len": config.lengths[0],
        "output_len": config.lengths[1],
        "prompt_kind": "messages" if config.endpoint == "chat" else "token_ids",
    }
    return SessionWorkload(config, synthetic_plans(config, think), facts)
