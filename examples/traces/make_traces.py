"""Write the small example traces and session files of examples/ (our own synthetic data, seeded).

    python examples/traces/make_traces.py            # rewrites the files next to this script

Each trace has requests whose hash ids repeat (a few shared system prompts, conversations whose
turns extend the previous turn's blocks), so a prefix cache has something to reuse:
- mooncake-small.jsonl   Mooncake format: `timestamp` in ms, 512-token blocks
- alibaba-small.jsonl    Alibaba format: `timestamp` in s, 16-token blocks, chat_id / parent_chat_id
- azure-small.csv        Azure LLM inference trace format: TIMESTAMP, ContextTokens, GeneratedTokens
- infergauge-small.jsonl our format: header line, `t` in s, `session_id`, 16-token blocks
- ../sessions/sharegpt-multiturn.json  ShareGPT-format conversations of 2-4 turns
"""

from __future__ import annotations

import json
import random
from datetime import datetime, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
SEED = 2026


def _conversations(rng: random.Random, n: int, block: int, span_s: float) -> list[dict]:
    """Rows of `n` conversations: each starts from one of 4 shared prefixes and every turn re-sends
    the previous turn's blocks plus new ones (hash ids shared exactly where the content is)."""
    rows, next_id = [], 1000
    for c in range(n):
        t = rng.uniform(0, span_s)
        prefix = [c % 4 * 10 + k for k in range(2)]  # shared "system prompt" blocks 0-1, 10-11, ...
        blocks = list(prefix)
        for turn in range(rng.randint(1, 3)):
            new = rng.randint(1, 3)
            blocks += list(range(next_id, next_id + new))
            next_id += new
            tail = rng.randint(1, block)  # the last block is partial
            rows.append(
                {
                    "t": round(t, 3),
                    "conv": c,
                    "turn": turn,
                    "blocks": list(blocks),
                    "input": (len(blocks) - 1) * block + tail,
                    "output": rng.randint(8, 64),
                }
            )
            t += rng.uniform(2.0, 6.0)
    return sorted(rows, key=lambda r: (r["t"], r["conv"], r["turn"]))


def _write_jsonl(path: Path, rows: list[dict]) -> None:
    path.write_text("".join(json.dumps(r, separators=(", ", ": ")) + "\n" for r in rows))


def mooncake(rng: random.Random) -> None:
    rows = _conversations(rng, 16, 512, 20.0)
    _write_jsonl(
        HERE / "mooncake-small.jsonl",
        [
            {
                "timestamp": round(r["t"] * 1000),
                "input_length": r["input"],
                "output_length": r["output"],
                "hash_ids": r["blocks"],
            }
            for r in rows
        ],
    )


def alibaba(rng: random.Random) -> None:
    rows = _conversations(rng, 16, 16, 20.0)
    chat_ids: dict[tuple[int, int], int] = {}
    out = []
    for i, r in enumerate(rows):
        chat_ids[(r["conv"], r["turn"])] = i
        parent = chat_ids[(r["conv"], r["turn"] - 1)] if r["turn"] else -1  # the turn before
        out.append(
            {
                "chat_id": i,
                "parent_chat_id": parent,
                "timestamp": r["t"],
                "input_length": r["input"],
                "output_length": r["output"],
                "type": "text",
                "turn": r["turn"] + 1,
                "hash_ids": r["blocks"],
            }
        )
    _write_jsonl(HERE / "alibaba-small.jsonl", out)


def azure(rng: random.Random) -> None:
    start = datetime(2026, 1, 5, 9, 0, 0)
    t, lines = 0.0, ["TIMESTAMP,ContextTokens,GeneratedTokens"]
    for _ in range(40):
        t += rng.expovariate(4.0)
        stamp = (start + timedelta(seconds=t)).strftime("%Y-%m-%d %H:%M:%S.%f") + "0"  # 7 digits
        lines.append(f"{stamp},{rng.randint(64, 1024)},{rng.randint(8, 128)}")
    (HERE / "azure-small.csv").write_text("\n".join(lines) + "\n")


def infergauge(rng: random.Random) -> None:
    rows = _conversations(rng, 12, 16, 10.0)
    out: list[dict] = [{"format": "infergauge-trace", "version": 1, "block_size": 16}]
    out += [
        {
            "t": r["t"],
            "input_len": r["input"],
            "output_len": r["output"],
            "hash_ids": r["blocks"],
            "session_id": f"conv-{r['conv']}",
        }
        for r in rows
    ]
    _write_jsonl(HERE / "infergauge-small.jsonl", out)


QUESTIONS = (
    "How does a prefix cache decide which blocks to keep?",
    "What happens to time to first token when the cache hits?",
    "Why do longer conversations cost more to prefill?",
    "Can two users share cached blocks of the same system prompt?",
    "What is the difference between TTFT and end-to-end latency?",
    "How would you size the KV cache for a chat workload?",
)
ANSWERS = (
    "It keeps blocks keyed by their tokens and the blocks before them, and evicts the least recently used.",
    "The engine skips the cached part of the prompt, so the first token comes sooner.",
    "Each turn re-sends the whole conversation, so the prompt grows with every answer.",
    "Yes, when their prompts begin with the same tokens the blocks are identical.",
)


def sharegpt(rng: random.Random) -> None:
    conversations = []
    for c in range(8):
        turns = []
        for _ in range(rng.randint(2, 4)):
            turns.append({"from": "human", "value": rng.choice(QUESTIONS)})
            turns.append({"from": "gpt", "value": rng.choice(ANSWERS)})
        conversations.append({"id": f"example-{c}", "conversations": turns})
    out = HERE.parent / "sessions"
    out.mkdir(exist_ok=True)
    (out / "sharegpt-multiturn.json").write_text(json.dumps(conversations, indent=1) + "\n")


def main() -> None:
    """Write every example file (the same bytes on every run)."""
    for make in (mooncake, alibaba, azure, infergauge, sharegpt):
        make(random.Random(f"{SEED}:{make.__name__}"))


if __name__ == "__main__":
    main()
