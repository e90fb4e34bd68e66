"""Timed trace replay: each trace row becomes one request, sent at its own time on the trace's clock.

Prompts are token ids built block by block: the tokens of a block depend only on (seed, hash id)
(`block_tokens`), so two requests that share hash ids share those blocks token for token and an
engine's prefix cache sees the reuse the trace recorded. A prompt is exactly `input_length` tokens:
`ceil(input_length / block_size)` blocks, the last one cut short. Hash ids beyond that are ignored;
missing ones (and traces without hash ids, such as Azure's) are filled with blocks unique to the
request. Send offsets are the trace's times minus the window's start, divided by `--trace-speedup`.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from loadgen.config import ConfigError, RunConfig
from loadgen.workload.generator import TOKEN_ID_HIGH, TOKEN_ID_LOW, RequestSpec, definition_fingerprint
from loadgen.workload.trace_formats import BLOCK_SIZES, TraceRow, read_trace
from loadgen.workload.traffic_config import TrafficConfig

NS = 1_000_000_000
_TOKEN_IDS = range(TOKEN_ID_LOW, TOKEN_ID_HIGH + 1)


@lru_cache(maxsize=8192)
def block_tokens(seed: int, hash_id: int, block_size: int) -> tuple[int, ...]:
    """The tokens of block `hash_id`: a function of (seed, hash id, block size) only."""
    return tuple(random.Random(f"{seed}:block:{hash_id}").choices(_TOKEN_IDS, k=block_size))


def unique_block(seed: int, index: int, position: int, block_size: int) -> tuple[int, ...]:
    """A block no other request has: request `index`'s block at `position` (no hash id for it)."""
    return tuple(random.Random(f"{seed}:req:{index}:block:{position}").choices(_TOKEN_IDS, k=block_size))


def prompt_tokens(
    seed: int, index: int, input_len: int, hash_ids: tuple[int, ...] | None, block_size: int
) -> list[int]:
    """Exactly `input_len` token ids: the hash ids' blocks in order, the last block cut short."""
    blocks = -(-input_len // block_size)
    ids = hash_ids or ()
    out: list[int] = []
    for position in range(blocks):
        if position < len(ids):
            out.extend(block_tokens(seed, ids[position], block_size))
        else:
            out.extend(unique_block(seed, index, position, block_size))
    del out[input_len:]
    return out


def _kept(row: TraceRow, index: int, trafficcfg: TrafficConfig, seed: int) -> bool:
    """Seeded sampling: keep a row (or its whole session) with probability `trace_sample`."""
    if trafficcfg.trace_sample is None:
        return True
    if trafficcfg.trace_sample_by == "session" and row.session is not None:
        key = f"session:{row.session}"
    else:
        key = f"row:{row.line}:{index}"
    return random.Random(f"{seed}:trace-sample:{key}").random() < trafficcfg.trace_sample


@dataclass(frozen=True)
class Planned:
    """One request of the replay: its trace row and send offset (ns after the run's start)."""

    row: TraceRow
    offset_ns: int


def plan_rows(rows: list[TraceRow], config: RunConfig, trafficcfg: TrafficConfig) -> list[Planned]:
    """Window, sampling, speedup and truncation (`--num-prompts` / `--duration`), in that order."""
    origin = rows[0].t_s
    start = origin + (trafficcfg.trace_start_s or 0.0)
    end = None if trafficcfg.trace_end_s is None else origin + trafficcfg.trace_end_s
    limit = config.total_requests if config.num_prompts is not None else None
    horizon = None if config.duration_s is None else round(config.duration_s * NS)
    out: list[Planned] = []
    for index, row in enumerate(rows):
        if row.t_s < start or (end is not None and row.t_s >= end):
            continue
        if not _kept(row, index, trafficcfg, config.seed):
            continue
        offset = round((row.t_s - start) / trafficcfg.trace_speedup * NS)
        if (horizon is not None and offset >= horizon) or (limit is not None and len(out) >= limit):
            break
        out.append(Planned(row, offset))
    if not out:
        raise ConfigError(
            f"trace {trafficcfg.trace!r}: no request left after the window and sampling "
            "(check --trace-start/--trace-end/--trace-sample)"
        )
    return out


class TraceWorkload:
    """Requests and send times of a trace file (see the module docstring)."""

    def __init__(self, config: RunConfig) -> None:
        traffic = config.traffic
        assert traffic is not None
        assert traffic.trace is not None
        self.traffic, self.seed, self.name = traffic, config.seed, "trace"
        self.sets_lengths = True  # the trace's, not --input-len / --output-len
        parsed, data = read_trace(traffic.trace, traffic.trace_format, traffic.trace_time_unit)
        self.fmt = parsed.fmt
        self.block_size = traffic.trace_block_size or parsed.block_size or BLOCK_SIZES[parsed.fmt]
        self.file_sha256 = hashlib.sha256(data).hexdigest()
        self.file_rows = len(parsed.rows)
        self.planned = plan_rows(parsed.rows, config, traffic)
        self._sequence: str | None = None
        self._turns: list[int | None] | None = None

    def schedule(self) -> list[int]:
        """The send offsets (ns), one per planned request."""
        return [p.offset_ns for p in self.planned]

    def request(self, index: int) -> RequestSpec:
        """The index-th request of the replay (token ids, exact length)."""
        row = self.planned[index].row
        prompt = prompt_tokens(self.seed, index, row.input_len, row.hash_ids, self.block_size)
        return RequestSpec(index, prompt, row.input_len, row.output_len)

    def session_turn(self, index: int) -> tuple[str | None, int | None]:
        """(session, turn index) of the index-th request in the trace's conversations ((None, None)
        when the trace names none): recorded on its requests.jsonl line."""
        if self._turns is None:
            seen: dict[str, int] = {}
            self._turns = []
            for p in self.planned:
                session = p.row.session
                self._turns.append(None if session is None else seen.setdefault(session, 0))
                if session is not None:
                    seen[session] += 1
        turn = self._turns[index]
        return (None, None) if turn is None else (self.planned[index].row.session, turn)

    def clip_to_model_len(self, max_model_len: int | None) -> None:
        """A trace is replayed as recorded: never clipped."""

    def sequence_sha256(self) -> str:
        """sha256 over every planned request (canonical form) and its offset, in order (computed once:
        about 1.4 ms a request of 7,000 tokens on the development VM)."""
        if self._sequence is not None:
            return self._sequence
        digest = hashlib.sha256()
        for index, planned in enumerate(self.planned):
            digest.update(f"{planned.offset_ns}\t".encode() + self.request(index).canonical_bytes() + b"\n")
        self._sequence = f"sha256:{digest.hexdigest()}"
        return self._sequence

    def describe(self) -> dict[str, Any]:
        """Workload facts for the manifest: the file's and the generated sequence's fingerprints."""
        t = self.traffic
        out: dict[str, Any] = {
            "name": "trace",
            "trace": t.trace,
            "trace_format": self.fmt,
            "trace_sha256": f"sha256:{self.file_sha256}",
            "trace_rows": self.file_rows,
            "block_size": self.block_size,
            "speedup": t.trace_speedup,
            "window_s": [t.trace_start_s, t.trace_end_s],
            "sample": t.trace_sample,
            "sample_by": t.trace_sample_by,
            "seed": self.seed,
            "prompt_kind": "token_ids",
            "planned_requests": len(self.planned),
            "request_sequence_sha256": self.sequence_sha256(),
        }
        definition = definition_fingerprint({k: v for k, v in out.items() if k != "trace"})
        return {**out, "definition_fingerprint": definition}
