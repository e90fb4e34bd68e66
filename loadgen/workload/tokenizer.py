"""A local tokenizer for measured lengths (`--tokenizer DIR`): the `tokenizers` package reading
DIR/tokenizer.json, else `transformers`' AutoTokenizer; both optional imports, a one-line error when
neither is installed or the directory holds no tokenizer."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from loadgen.config import ConfigError

Encode = Callable[[str], list[int]]


def _with_tokenizers(path: Path) -> Encode | None:
    try:
        from tokenizers import Tokenizer  # type: ignore[import-not-found]
    except ImportError:
        return None
    file = path / "tokenizer.json" if path.is_dir() else path
    if not file.is_file():
        return None
    tok = Tokenizer.from_file(str(file))
    return lambda text: list(tok.encode(text, add_special_tokens=False).ids)


def _with_transformers(path: Path) -> Encode | None:
    try:
        from transformers import AutoTokenizer  # type: ignore[import-not-found]
    except ImportError:
        return None
    tok = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    return lambda text: list(tok(text, add_special_tokens=False).input_ids)


def load_tokenizer(spec: str) -> Encode:
    """The encode function of the tokenizer at `spec` (a directory or a tokenizer.json)."""
    path = Path(spec)
    if not path.exists():
        raise ConfigError(f"invalid --tokenizer {spec!r}: no such file or directory")
    for loader in (_with_tokenizers, _with_transformers):
        try:
            encode = loader(path)
        except Exception as exc:  # noqa: BLE001 - a library's own error, reported in one line
            raise ConfigError(
                f"invalid --tokenizer {spec!r}: {type(exc).__name__}: {str(exc)[:200]}"
            ) from None
        if encode is not None:
            return encode
    raise ConfigError(
        f"--tokenizer {spec!r} needs the 'tokenizers' package (pip install tokenizers) or 'transformers', "
        "and a tokenizer.json there"
    )
