"""Issue 23: the dispatch draws and encodes its requests in batches ahead of their sends (Prepared):
the same requests, bodies and order as one at a time, and what was drawn but never sent is given back
to the workload, so its facts count only what was sent."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

from loadgen.config import RunConfig
from loadgen.run.measure import PREP_BATCH, Prepared
from loadgen.targets import get_target
from loadgen.workload.generator import SyntheticWorkload

CONFIG = RunConfig(target="sim", input_len="lognormal:400,1", output_len="fixed:32", seed=3)
MODEL_LEN = 512


class Counted:
    """The schedule's (index, offset) pairs, counting how many were taken."""

    def __init__(self, n: int) -> None:
        self.taken = 0
        self._pairs = iter([(i, i * 1_000) for i in range(n)])

    def __iter__(self) -> Counted:
        return self

    def __next__(self) -> tuple[int, int]:
        pair = next(self._pairs)
        self.taken += 1
        return pair


def _workload() -> SyntheticWorkload:
    workload = SyntheticWorkload(CONFIG)
    workload.clip_to_model_len(MODEL_LEN)
    return workload


def _prepared(pairs: Counted, batch: int = PREP_BATCH) -> tuple[Prepared, SyntheticWorkload]:
    workload = _workload()
    return Prepared(get_target("sim"), workload, "m", CONFIG, pairs, batch), workload


@pytest.mark.parametrize("batch", [1, 5, PREP_BATCH])
def test_the_batches_hold_what_one_at_a_time_would_send(batch: int) -> None:
    n = 3 * PREP_BATCH + 3
    ahead, _ = _prepared(Counted(n), batch)
    one, target = _workload(), get_target("sim")
    got = list(ahead)
    assert [item[0] for item in got] == list(range(n))
    for index, offset, spec, path, body in got:
        want_path, payload = target.build_payload(
            one.request(index), model="m", endpoint=CONFIG.endpoint, ignore_eos=CONFIG.ignore_eos
        )
        assert (offset, spec, path) == (index * 1_000, one.request(index), want_path)
        assert json.loads(body) == payload


def test_the_schedule_is_taken_a_batch_at_a_time() -> None:
    pairs = Counted(100)
    ahead, _ = _prepared(pairs, 8)
    ahead.fill()
    assert pairs.taken == 8
    first = list(itertools.islice(ahead, 8))  # the first batch: nothing more is drawn
    assert pairs.taken == 8
    assert [item[0] for item in first] == list(range(8))
    next(ahead)
    assert pairs.taken == 16


def test_requests_drawn_and_not_sent_are_given_back() -> None:
    pairs = Counted(200)
    ahead, workload = _prepared(pairs)
    sent = []
    for item in ahead:
        if item[0] == 40:  # the dispatch stops here: drawn, not sent
            break
        ahead.sent()
        sent.append(item[0])
    ahead.close()
    # only the sent requests are counted as clipped: the drawn rest (40 up to the batch's end) is not
    expected = _clipped(200) & set(sent)
    assert expected, "the lognormal tail clips some of the first 40 requests"
    assert workload.clipped == expected
    assert workload.describe()["clipped_requests"] == len(expected)


def test_closing_after_the_last_send_gives_nothing_back() -> None:
    ahead, workload = _prepared(Counted(PREP_BATCH + 2))
    for _ in ahead:
        ahead.sent()
    ahead.close()
    assert workload.clipped == _clipped(PREP_BATCH + 2)


def _clipped(n: int) -> set[int]:
    workload = _workload()
    for i in range(n):
        workload.request(i)
    return set(workload.clipped)


def test_a_request_that_cannot_be_built_fails_in_its_turn() -> None:
    ahead, workload = _prepared(Counted(40))
    original = workload.request

    def failing(index: int) -> Any:
        if index == 5:
            raise RuntimeError("boom")
        return original(index)

    workload.request = failing  # type: ignore[method-assign]
    got = [next(ahead)[0] for _ in range(5)]
    with pytest.raises(RuntimeError, match="boom"):
        next(ahead)
    assert got == [0, 1, 2, 3, 4]  # the requests before it go out, as one at a time
