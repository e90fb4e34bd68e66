"""Issue #24 item 3: one run's state is made whole by one constructor and never patched: the
RunContext and what each step returns (Prepared, Announced, Measured) are frozen."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Any

import pytest

from loadgen.config import RunConfig
from loadgen.records import EngineMetadata
from loadgen.run.context import Announced, Measured, Prepared, RunContext
from loadgen.targets import get_target


def _context(**known: Any) -> RunContext:
    config = RunConfig(base_url="http://127.0.0.1:1", model="m", metrics_port=0)
    return RunContext(
        config, "r1", get_target("openai"), None, [0, 10], "http://127.0.0.1:1", False, None, **known
    )  # type: ignore[arg-type]


def test_everything_known_before_the_run_goes_to_the_constructor() -> None:
    extra = {"shard": {"index": 0, "count": 2}}
    seen: list[Any] = []
    ctx = _context(on_result=seen.append, manifest_extra=extra)
    assert ctx.manifest_extra is extra
    assert ctx.on_result is not None
    with pytest.raises(dataclasses.FrozenInstanceError):
        ctx.run_id = "patched"  # type: ignore[misc]


@pytest.mark.parametrize("kind", [RunContext, Prepared, Announced, Measured])
def test_the_run_state_is_frozen(kind: type) -> None:
    assert dataclasses.is_dataclass(kind)
    assert kind.__dataclass_params__.frozen  # type: ignore[attr-defined]


def test_the_annotation_text_names_the_run_target_and_model() -> None:
    ctx = _context()
    meta = EngineMetadata(engine="vllm", version="0.26.0", model="tiny", max_model_len=2048, server_args={})
    prep = Prepared(meta, "tiny", (None, ""), datetime.now(UTC), None)
    assert prep.text(ctx) == "loadgen run r1 (sim, tiny)"
