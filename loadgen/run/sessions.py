"""Drive multi-turn sessions: sessions arrive open-loop, each one's turns go closed-loop.

Each session is one task: at its arrival it sends turn 0; when a turn's answer has ended (its last
byte read), the next turn is due after the session's think time, with the answer the engine
actually gave in its prompt (loadgen.workload.sessions.Conversation). The answer is read from the
stamped stream the moment the request finishes, before the finisher parses it. A turn that fails
ends its session (the remaining turns are not sent). `--max-concurrency` bounds sessions in progress.
A turn's due time is its `scheduled_ns`, so schedule lag and fidelity are measured against it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import Any

from infergauge.engines import ENGINES
from loadgen import jsonbytes
from loadgen.records import RequestRecord
from loadgen.targets import Target
from loadgen.transport.sse import ProtocolError, event_data, split_events
from loadgen.workload.sessions import SessionPlan, SessionWorkload, Turn
from loadgen.workload.shard import perf_base


def answer_of(reads: list[tuple[int, bytes]] | None) -> tuple[str, list[int] | None]:
    """(text, token ids when the engine streamed them) of a completions or chat stream."""
    texts: list[str] = []
    ids: list[int] = []
    for _, event in split_events(list(reads or ())):
        try:
            data = event_data(event)
        except ProtocolError:
            continue
        if not data or data == b"[DONE]":
            continue
        with contextlib.suppress(ValueError):
            obj = json.loads(data)
            for choice in obj.get("choices") or ():
                delta = choice.get("delta") or {}
                texts.append(str(choice.get("text") or delta.get("content") or ""))
                ids.extend(choice.get("token_ids") or ())
    return "".join(texts), ids or None


def next_due(start_ns: int, answered_ns: int, turn: Turn) -> int:
    """When a turn is due: its think time after the previous answer ended, or, for a trace session's
    turn, its recorded time unless the previous answer ended later (then right away)."""
    if turn.at_ns is not None:
        return max(start_ns + turn.at_ns, answered_ns)
    return max(answered_ns, time.perf_counter_ns()) + round(turn.think_s * 1e9)


class SessionDriver:
    """The run's sessions in flight; `on_done` wraps the dispatcher's to catch each answer."""

    def __init__(self, run: Any, target: Target, workload: SessionWorkload, model: str) -> None:
        self.run, self.target, self.workload, self.model = run, target, workload, model
        self.waiting: dict[int, asyncio.Future[tuple[RequestRecord, str, list[int] | None]]] = {}
        dispatcher = run.dispatcher
        self._forward = dispatcher.on_done
        dispatcher.on_done = self.on_done
        # an engine that streams each chunk's token ids when asked (vLLM): the next turn then holds
        # the answer's exact ids
        spec = ENGINES.get(getattr(target, "engine", ""))
        self.ids_field = None if workload.as_chat or spec is None else spec.answer_ids_field
        limit = workload.max_concurrency
        self.slots = asyncio.Semaphore(limit) if limit else None

    def on_done(self, record: RequestRecord) -> None:
        """A turn finished: hand its answer to its session, then to the run's finisher."""
        future = self.waiting.pop(record.index, None)
        if future is not None and not future.done():
            text, ids = answer_of(record.raw) if record.fallback is None else ("", None)
            future.set_result((record, text, ids))
        self._forward(record)

    async def session(self, plan: SessionPlan, horizon: int | None, first_due: int) -> None:
        """Send the session's turns in order (closed loop); stop at a failure, a stop or the horizon."""
        run, cfg = self.run, self.run.config
        conversation = self.workload.conversation(plan)
        due = first_due
        for turn in range(len(plan.turns)):
            spec = conversation.request(turn)
            path, payload = self.target.build_payload(
                spec, model=self.model, endpoint=cfg.endpoint, ignore_eos=cfg.ignore_eos
            )
            if self.ids_field:
                payload[self.ids_field] = True
            record = RequestRecord(
                spec.index, f"{run.run_id}-{spec.index:06d}", False, due, spec.input_len, spec.output_len
            )
            record.session_id, record.turn_index = plan.session_id, turn
            future = asyncio.get_running_loop().create_future()
            self.waiting[spec.index] = future
            if not await run.dispatcher.send_at(due, record, path, jsonbytes.compact(payload), horizon):
                self.waiting.pop(spec.index, None)
                return
            run.sent.add(spec)
            done, text, ids = await future
            if done.outcome not in (None, "ok") or done.fallback is not None or done.http_status != 200:
                return
            conversation.answered(text, ids)
            if turn + 1 < len(plan.turns):
                due = next_due(run.start_ns, done.done_ns or time.perf_counter_ns(), plan.turns[turn + 1])

    async def bounded(self, plan: SessionPlan, horizon: int | None) -> None:
        """One session under the `--max-concurrency` bound on sessions (when given)."""
        arrival = self.run.start_ns + plan.arrival_ns
        if self.slots is None:
            await self.session(plan, horizon, arrival)
            return
        await self.run.dispatcher.waker.sleep_until(arrival)
        async with self.slots:  # a session that waited for a slot is due when it got one
            await self.session(plan, horizon, max(arrival, time.perf_counter_ns()))


async def drive_sessions(run: Any, target: Target, workload: SessionWorkload, model: str) -> None:
    """Run every session of the workload (cancelled with the dispatch task on a stop)."""
    cfg = run.config
    run.start_ns = perf_base(run.start_at)
    horizon = None if cfg.duration_s is None else run.start_ns + int(cfg.duration_s * 1e9)
    driver = SessionDriver(run, target, workload, model)
    tasks = [asyncio.create_task(driver.bounded(plan, horizon)) for plan in workload.plans]
    try:
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
