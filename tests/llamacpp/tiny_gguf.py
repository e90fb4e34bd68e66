"""A tiny llama-architecture GGUF model (random weights, byte-level SentencePiece vocab), for running
the real `llama-server` on a CPU in tests: written with the `gguf` package, about 1 MB, no download.

    python -m tests.llamacpp.tiny_gguf OUT.gguf
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

EMBED, LAYERS, HEADS, FFN, CONTEXT = 64, 2, 4, 128, 2048
VOCAB = 8000  # loadgen's synthetic prompts draw token ids 100-7999 (loadgen.workload.generator)
SPECIAL = ["<unk>", "<s>", "</s>"]


def vocabulary() -> tuple[list[bytes], list[float], list[int]]:
    """<unk>, <s>, </s>, the 256 byte tokens, the printable ASCII letters as pieces of their own, and
    filler pieces up to VOCAB tokens."""
    import gguf

    tokens = [t.encode() for t in SPECIAL] + [f"<0x{b:02X}>".encode() for b in range(256)]
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL]
    types += [gguf.TokenType.BYTE] * 256
    words = [chr(c) for c in range(0x21, 0x7F)] + ["\u2581" + chr(c) for c in range(0x61, 0x7B)] + ["\u2581"]
    words += [f"<t{i}>" for i in range(VOCAB - 259 - len(words))]
    tokens += [w.encode() for w in words]
    types += [gguf.TokenType.NORMAL] * len(words)
    scores = [0.0] * 259 + [-float(i) for i in range(len(words))]
    return tokens, scores, [int(t) for t in types]


def write(path: Path, seed: int = 0) -> Path:
    """Write the model to `path`; the same seed writes the same bytes."""
    import gguf

    rng = np.random.default_rng(seed)
    tokens, scores, types = vocabulary()
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("infergauge-tiny-llama")
    writer.add_context_length(CONTEXT)
    writer.add_embedding_length(EMBED)
    writer.add_block_count(LAYERS)
    writer.add_feed_forward_length(FFN)
    writer.add_head_count(HEADS)
    writer.add_head_count_kv(HEADS)
    writer.add_rope_dimension_count(EMBED // HEADS)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)
    writer.add_add_bos_token(True)
    writer.add_chat_template(
        "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}<|assistant|>"
    )

    def tensor(name: str, *shape: int) -> None:
        writer.add_tensor(name, (rng.standard_normal(shape) * 0.02).astype(np.float32))

    vocab = len(tokens)
    tensor("token_embd.weight", vocab, EMBED)
    writer.add_tensor("output_norm.weight", np.ones(EMBED, dtype=np.float32))
    tensor("output.weight", vocab, EMBED)
    for i in range(LAYERS):
        writer.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(EMBED, dtype=np.float32))
        writer.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(EMBED, dtype=np.float32))
        for part in ("attn_q", "attn_k", "attn_v", "attn_output"):
            tensor(f"blk.{i}.{part}.weight", EMBED, EMBED)
        tensor(f"blk.{i}.ffn_gate.weight", FFN, EMBED)
        tensor(f"blk.{i}.ffn_up.weight", FFN, EMBED)
        tensor(f"blk.{i}.ffn_down.weight", EMBED, FFN)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


if __name__ == "__main__":
    print(write(Path(sys.argv[1])))
