"""One HTTP request (`RequestGroup`) and the sequences it asked for (one per prompt)."""

from __future__ import annotations

from typing import Any, Protocol

WAITING, RUNNING, FINISHED = 0, 1, 2


class GroupSink(Protocol):
    """Receives a group's output: the streaming writer or the non-streaming collector."""

    def on_tokens(self, seq: Sequence, now_ns: int) -> None: ...

    def on_group_done(self, group: RequestGroup, now_ns: int) -> None: ...

    def on_aborted(self) -> None: ...


class Sequence:
    """One prompt being served: scheduling state, KV holdings and timestamps (perf_counter ns)."""

    __slots__ = (
        "group",
        "index",
        "prompt_ids",
        "prompt_len",
        "max_tokens",
        "target_len",
        "finish_reason",
        "generated",
        "num_computed",
        "prefill_len",
        "state",
        "cached_tokens",
        "hashes",
        "private_blocks",
        "shared_hashes",
        "arrival_ns",
        "scheduled_ns",
        "first_token_ns",
        "last_token_ns",
        "prev_token_ns",
        "out_seed",
        "emitted",
        "token_ns",
        "preemptions",
        "computed_prompt_tokens",
        "kv_cap",
    )

    def __init__(
        self,
        group: RequestGroup,
        index: int,
        prompt_ids: list[int],
        max_tokens: int,
        target_len: int,
        out_seed: int,
    ) -> None:
        self.group = group
        self.index = index
        self.prompt_ids = prompt_ids
        self.prompt_len = len(prompt_ids)
        self.max_tokens = max_tokens
        self.target_len = target_len  # decided at arrival: max_tokens with ignore_eos, else sampled
        self.finish_reason = ""
        self.generated = 0
        self.num_computed = 0  # tokens whose KV is computed in the current residency
        self.prefill_len = self.prompt_len  # tokens to compute before the next output token
        self.state = WAITING
        self.cached_tokens = 0  # prefix-cache hits at the latest admission
        self.hashes: list[int] = []
        self.private_blocks = 0
        self.shared_hashes: list[int] = []
        self.arrival_ns = group.arrival_ns
        self.scheduled_ns = 0
        self.first_token_ns = 0
        self.last_token_ns = 0
        self.prev_token_ns = 0
        self.out_seed = out_seed
        self.emitted = 0  # tokens handed to the sink
        self.token_ns: list[int] | None = None
        self.preemptions = 0
        self.computed_prompt_tokens = 0
        self.kv_cap = 0  # tokens the KV blocks it holds can store

    @property
    def context_len(self) -> int:
        return self.prompt_len + self.generated


class RequestGroup:
    """One HTTP request: its sequences, parameters the response needs, and the sink."""

    __slots__ = (
        "request_id",
        "x_request_id",
        "seqs",
        "remaining",
        "arrival_ns",
        "arrival_wall_ns",
        "sink",
        "params",
        "aborted",
        "max_tokens_param",
    )

    def __init__(
        self,
        request_id: str,
        x_request_id: str | None,
        arrival_ns: int,
        arrival_wall_ns: int,
        params: dict[str, Any],
    ) -> None:
        self.request_id = request_id
        self.x_request_id = x_request_id
        self.seqs: list[Sequence] = []
        self.remaining = 0
        self.arrival_ns = arrival_ns
        self.arrival_wall_ns = arrival_wall_ns
        self.sink: GroupSink | None = None
        self.params = params
        self.aborted = False
        self.max_tokens_param = 0

    @property
    def prompt_tokens(self) -> int:
        return sum(s.prompt_len for s in self.seqs)

    @property
    def completion_tokens(self) -> int:
        return sum(s.generated for s in self.seqs)
