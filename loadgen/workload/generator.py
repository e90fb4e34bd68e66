"""Seeded workloads: the same seed and options give the same request sequence in any process.

Request `i` is drawn from its own RNG (`Random(f"{seed}:req:{i}")`), so the sequence does not depend
on how many requests are sent, on the rate or on the target. Token-id prompts (`random`,
`shared-prefix` on completions) have exact input lengths without a tokenizer; text prompts use one
common English word per intended token (close to, not exactly, one token each).
"""

from __future__ import annotations

import hashlib
import json
import random
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import repeat
from math import floor
from pathlib import Path
from typing import Any

from loadgen import jsonbytes
from loadgen.config import RunConfig
from loadgen.jsonbytes import _json
from loadgen.workload.clip import clip_lengths, clip_needed
from loadgen.workload.distributions import LengthDist, parse_length

# Token ids drawn for synthetic prompts: above the special tokens, inside the smallest vocabulary we
# meet (the golden captures' 8,000-token tokenizer; Llama/Qwen vocabularies are far larger).
TOKEN_ID_LOW, TOKEN_ID_HIGH = 100, 7999
_WORDS_TEXT = (
    "time year people way day man thing woman life child world school state family student group "
    "country problem hand part place case week company system program question work government "
    "number night point home water room mother area money story fact month lot right study book eye "
    "job word business issue side kind head house service friend father power hour game line end "
    "member law car city name team minute idea kid body back parent face others level office door "
    "health person art war history party result change morning reason research girl guy moment air "
    "teacher force education "
)
WORDS = tuple(_WORDS_TEXT.split())


@dataclass(frozen=True)
class RequestSpec:
    """One request of the sequence. `prompt` is token ids or text; `system` is a shared prefix (text)."""

    index: int
    prompt: list[int] | str
    input_len: int
    output_len: int
    system: str | None = None
    messages: list[dict[str, Any]] | None = None
    input_len_exact: bool = True

    def canonical(self) -> str:
        """Stable JSON of what is sent (for the workload fingerprint)."""
        return self.canonical_bytes().decode()

    def canonical_bytes(self) -> bytes:
        """`canonical()` as bytes (what the fingerprint digests), without the text in between."""
        body = {
            "prompt": self.prompt,
            "system": self.system,
            "messages": self.messages,
            "out": self.output_len,
        }
        return jsonbytes.canonical(body)


def fingerprint(requests: Iterable[RequestSpec]) -> str:
    """The sequence actually sent: sha256 over the canonical form of each request, in order
    (`sha256:<hex>`); two runs of one definition that sent different counts differ here."""
    sent = SentDigest()
    for spec in requests:
        sent.add(spec)
    return sent.value()


DIGEST_BATCH = 32  # requests SentDigest.catch_up digests at once


class SentDigest:
    """`fingerprint` fed while a run goes: `add` holds a sent request until `step` digests it (in send
    order, off the send path) and lets it go, so a long run does not keep every prompt in memory."""

    def __init__(self) -> None:
        self._digest = hashlib.sha256()
        self._waiting: deque[RequestSpec] = deque()
        self.count = 0
        self.also: Callable[[RequestSpec], None] | None = None  # sees each request as it is digested

    def add(self, spec: RequestSpec) -> None:
        """A request was sent (the dispatcher's side: no encoding here)."""
        self._waiting.append(spec)
        self.count += 1

    def step(self, n: int) -> None:
        """Digest up to `n` waiting requests, oldest first."""
        waiting, update, also = self._waiting, self._digest.update, self.also
        for _ in range(min(n, len(waiting))):
            spec = waiting.popleft()
            update(spec.canonical_bytes() + b"\n")
            if also is not None:
                also(spec)

    def catch_up(self) -> None:
        """The finisher's step, once a finished request is accounted: nothing until DIGEST_BATCH requests
        wait, then that many (~0.1 ms), so the digest keeps up with the sends in short slices and
        its code runs in a batch while it is in cache (a request digested on its own, between reads,
        costs several times more: issue #23)."""
        if len(self._waiting) >= DIGEST_BATCH:
            self.step(DIGEST_BATCH)

    def value(self) -> str:
        """The fingerprint of every request added so far (`sha256:<hex>`)."""
        self.step(len(self._waiting))
        return f"sha256:{self._digest.copy().hexdigest()}"


def definition_fingerprint(facts: dict[str, Any]) -> str:
    """The workload's definition (generator, its options, seed; not how many were sent): sha256 over
    the canonical JSON of its `describe()` facts (`sha256:<hex>`). Comparability checks use this."""
    body = json.dumps({k: v for k, v in facts.items() if k != "definition_fingerprint"}, sort_keys=True)
    return f"sha256:{hashlib.sha256(body.encode()).hexdigest()}"


_TOKEN_IDS = range(TOKEN_ID_LOW, TOKEN_ID_HIGH + 1)


def _token_ids(rng: random.Random, n: int) -> list[int]:
    """`rng.choices(_TOKEN_IDS, k=n)` drawn the way CPython's `choices` draws (`floor(random() * len)`),
    without indexing the range per token: the same ids (tested against `choices`), ~30% less CPU. In C
    where `loadgen._json` is built: the same draws from the words of one `getrandbits` (the generator
    left in the same state)."""
    if _json is not None:
        if n <= 0:
            return []
        return _json.token_ids(
            rng.getrandbits(64 * n).to_bytes(8 * n, "little"), TOKEN_ID_LOW, len(_TOKEN_IDS)
        )  # type: ignore[no-any-return]
    rnd, size = rng.random, float(len(_TOKEN_IDS))
    return [TOKEN_ID_LOW + floor(rnd() * size) for _ in repeat(None, n)]


def _text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choices(WORDS, k=n))


class SyntheticWorkload:
    """`random` (token ids), `random-text` and `shared-prefix` prompts with seeded lengths."""

    def __init__(self, config: RunConfig) -> None:
        self.name = config.resolved_workload
        self.seed = config.seed
        spec_in, spec_out = config.lengths
        self.input_dist: LengthDist = parse_length(spec_in)
        self.output_dist: LengthDist = parse_length(spec_out)
        self.as_text = self.name == "random-text" or config.endpoint == "chat"
        self.prefix_len = config.shared_prefix_len if self.name == "shared-prefix" else 0
        self.groups = config.shared_prefix_groups
        self._prefixes: dict[int, list[int] | str] = {}
        self.clip_to: int | None = None  # the engine's max_model_len, when lengths can exceed it
        self.clipped: set[int] = set()  # indexes of the requests drawn longer than clip_to

    def clip_to_model_len(self, max_model_len: int | None) -> None:
        """Clip input + output to the engine's model length from now on, when they can exceed it."""
        needed = max_model_len is not None and clip_needed(
            self.input_dist, self.output_dist, self.prefix_len, max_model_len
        )
        self.clip_to = max_model_len if needed else None

    def _lengths(self, index: int, rng: random.Random) -> tuple[int, int]:
        n_in, n_out = self.input_dist.sample(rng), self.output_dist.sample(rng)
        if self.clip_to is None:
            return n_in, n_out
        total_in, clipped_out = clip_lengths(self.prefix_len + n_in, n_out, self.clip_to)
        clipped_in = max(1, total_in - self.prefix_len)
        if (clipped_in, clipped_out) != (n_in, n_out):
            self.clipped.add(index)
        return clipped_in, clipped_out

    def _prefix(self, group: int) -> list[int] | str:
        if group not in self._prefixes:
            rng = random.Random(f"{self.seed}:prefix:{group}")
            make = _text if self.as_text else _token_ids
            self._prefixes[group] = make(rng, self.prefix_len)
        return self._prefixes[group]

    def request(self, index: int) -> RequestSpec:
        """The index-th request (deterministic in seed, options and index)."""
        rng = random.Random(f"{self.seed}:req:{index}")
        n_in, n_out = self._lengths(index, rng)
        body: list[int] | str = _text(rng, n_in) if self.as_text else _token_ids(rng, n_in)
        if not self.prefix_len:
            return RequestSpec(index, body, n_in, n_out, input_len_exact=not self.as_text)
        prefix = self._prefix(index % self.groups)
        total = self.prefix_len + n_in
        if isinstance(prefix, str):
            return RequestSpec(index, body, total, n_out, system=prefix, input_len_exact=False)
        assert isinstance(body, list)
        return RequestSpec(index, prefix + body, total, n_out)

    def unsent(self, indices: Iterable[int]) -> None:
        """These requests were drawn ahead and never sent (the run stopped first): not counted."""
        self.clipped.difference_update(indices)

    def describe(self) -> dict[str, Any]:
        """Workload facts for the manifest, with the fingerprint of the definition they make."""
        out: dict[str, Any] = {
            "name": self.name,
            "input_len": str(self.input_dist),
            "output_len": str(self.output_dist),
            "seed": self.seed,
            "prompt_kind": "text" if self.as_text else "token_ids",
        }
        if self.prefix_len:
            out.update(shared_prefix_len=self.prefix_len, shared_prefix_groups=self.groups)
        if self.clip_to is not None:  # part of the definition: the same draws, clipped the same way
            out["clipped_to_max_model_len"] = self.clip_to
        clipped = {"clipped_requests": len(self.clipped)} if self.clip_to is not None else {}
        return {**out, "definition_fingerprint": definition_fingerprint(out), **clipped}


class JsonlWorkload:
    """Requests read from a JSONL file in file order (cycled when more are asked for)."""

    def __init__(self, config: RunConfig) -> None:
        assert config.dataset is not None
        self.name = "jsonl"
        self.path = Path(config.dataset)
        self.seed = config.seed
        self.output_dist = parse_length(config.lengths[1])
        from loadgen.workload.dataset import read_dataset  # --workload jsonl only

        self.records = read_dataset(self.path, config.endpoint)  # every line checked before the run

    def request(self, index: int) -> RequestSpec:
        """The index-th request: record `index % len(records)`; missing output lengths are drawn."""
        record = self.records[index % len(self.records)]
        out_len = record.output_len
        if out_len is None:
            out_len = self.output_dist.sample(random.Random(f"{self.seed}:req:{index}"))
        if isinstance(record.prompt, list):
            return RequestSpec(index, record.prompt, len(record.prompt), out_len)
        texts = [record.system or "", record.prompt or ""]
        texts += [str(m.get("content", "")) for m in record.messages or []]
        return RequestSpec(
            index,
            record.prompt or "",
            len(" ".join(texts).split()),
            out_len,
            system=record.system,
            messages=record.messages,
            input_len_exact=False,
        )

    def clip_to_model_len(self, max_model_len: int | None) -> None:
        """A dataset is sent as written (its records' lengths are the point): never clipped."""

    @property
    def draws_output_len(self) -> bool:
        """Whether some record has no output length of its own (then `--output-len` is drawn)."""
        return any(record.output_len is None for record in self.records)

    def describe(self) -> dict[str, Any]:
        """Workload facts for the manifest, with the fingerprint of the definition they make."""
        digest = hashlib.sha256(self.path.read_bytes()).hexdigest()
        out = {
            "name": "jsonl",
            "dataset": str(self.path),
            "dataset_sha256": digest,
            "records": len(self.records),
            "output_len": str(self.output_dist) if self.draws_output_len else None,
            "seed": self.seed,
        }
        # where the file lies is not part of the definition: its content (sha256) is
        definition = definition_fingerprint({k: v for k, v in out.items() if k != "dataset"})
        return {**out, "definition_fingerprint": definition}


Workload = SyntheticWorkload | JsonlWorkload


def build_workload(config: RunConfig) -> Any:
    """The workload the config names."""
    if config.traffic is not None and config.traffic.kind != "none":
        from loadgen.workload.traffic import build_traffic_workload  # it imports this module

        return build_traffic_workload(config)
    if config.resolved_workload == "jsonl":
        return JsonlWorkload(config)
    return SyntheticWorkload(config)
