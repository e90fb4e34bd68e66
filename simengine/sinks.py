"""Where a request's tokens go: straight onto the socket (streaming) or into a final JSON body.

The step loop calls `on_tokens` for every sequence that got a token in one pass; a streaming sink
frames the SSE events as one HTTP chunk and hands it to the transport without awaiting, so one step
serving a thousand streams costs a thousand `transport.write` calls and no task switches.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from simengine.faults import NO_FAULTS, RequestFaults
from simengine.groundtruth import SendStamps
from simengine.request import FINISHED, RequestGroup, Sequence
from simengine.sse import DONE, ChunkWriter
from simengine.tokens import OUTPUT_PIECES, OUTPUT_PIECES_JSON

_N_PIECES = len(OUTPUT_PIECES_JSON)
perf_ns = time.perf_counter_ns
wall_ns = time.time_ns


def piece_index(seq: Sequence, position: int) -> int:
    """Output token `position` (1-based) of `seq`: a fixed pseudo-random walk over the piece list."""
    return (seq.out_seed + position * 7919) % _N_PIECES


def output_text(seq: Sequence) -> str:
    """The full text of a sequence's generated tokens (non-streaming responses)."""
    return "".join(OUTPUT_PIECES[piece_index(seq, i)] for i in range(1, seq.generated + 1))


class CollectSink:
    """Non-streaming: just wait for the whole group; the handler renders the JSON body."""

    def __init__(self, done: asyncio.Future[None]) -> None:
        self.done = done

    def on_tokens(self, seq: Sequence, now_ns: int) -> None:
        seq.emitted = seq.generated

    def on_group_done(self, group: RequestGroup, now_ns: int) -> None:
        if not self.done.done():
            self.done.set_result(None)

    def on_aborted(self) -> None:
        if not self.done.done():
            self.done.set_result(None)


class StreamSink:
    """Streaming: SSE events written to the transport as chunked-encoding frames."""

    def __init__(
        self,
        transport: asyncio.Transport,
        writer: ChunkWriter,
        *,
        include_usage: bool,
        continuous_usage: bool,
        done: asyncio.Future[None],
        stamps: SendStamps | None,
        single: bool,
        on_disconnect: Callable[[RequestGroup], None],
        faults: RequestFaults = NO_FAULTS,
        stall_s: float = 0.0,
        cached_tokens: Callable[[RequestGroup], int | None] | None = None,
    ) -> None:
        self.transport = transport
        self.cached_tokens = cached_tokens  # the personality's usage.prompt_tokens_details
        self.writer = writer
        self.include_usage = include_usage
        self.continuous = continuous_usage
        self.done = done
        self.stamps = stamps
        self.on_disconnect = on_disconnect
        self.faults = faults
        self.stall_s = stall_s
        self.held: list[bytes] | None = None  # frames held back during a stall
        self.held_tokens = 0
        self.finish_after_release: RequestGroup | None = None
        self.closed = False
        # fast path: one sequence, no faults, no per-chunk usage -> precomputed head and tail bytes
        self.fast = single and not continuous_usage and not faults.any_stream_fault
        self.fast_head = writer.head + b"0" + writer.style.text_open
        self.fast_tail = writer.style.text_close + writer.null_tail + writer.style.close_plain

    def on_tokens(self, seq: Sequence, now_ns: int) -> None:
        """Write the SSE events for the tokens `seq` got in this step (normally exactly one)."""
        pos = seq.generated
        if self.fast and seq.emitted == pos - 1 and pos > 1 and seq.state != FINISHED and self.held is None:
            seq.emitted = pos
            data = (
                self.fast_head + OUTPUT_PIECES_JSON[(seq.out_seed + pos * 7919) % _N_PIECES] + self.fast_tail
            )
            transport = self.transport
            if self.closed or transport.is_closing():
                self._send(data, 1, seq.group)  # handles the disconnect
                return
            transport.write(b"%x\r\n%b\r\n" % (len(data), data))
            if self.stamps is not None:
                self.stamps.stamp(perf_ns(), wall_ns(), 1)
            return
        self._on_tokens_general(seq)

    def _on_tokens_general(self, seq: Sequence) -> None:
        w = self.writer
        frames: list[bytes] = []
        if seq.emitted == 0 and (role := w.role(seq.index)):
            frames.append(role)
        fresh = seq.generated - seq.emitted
        while seq.emitted < seq.generated:
            seq.emitted += 1
            pos = seq.emitted
            last = pos == seq.generated and seq.state == FINISHED
            finish = seq.finish_reason if last and w.finish_in_token else None
            usage = (seq.prompt_len, pos) if self.continuous else None
            frames.append(
                w.token(seq.index, OUTPUT_PIECES_JSON[(seq.out_seed + pos * 7919) % _N_PIECES], finish, usage)
            )
            if last and not w.finish_in_token:
                frames.append(w.finish(seq.index, seq.finish_reason))
            if self.faults.any_stream_fault and self._fault(seq, pos, frames):
                return
        self._send(b"".join(frames), fresh, seq.group)

    def _fault(self, seq: Sequence, pos: int, frames: list[bytes]) -> bool:
        """Apply this request's fault at token `pos`; True when the stream is gone."""
        f = self.faults
        if pos == f.malformed_at:
            frames[-1] = frames[-1][: len(frames[-1]) // 2] + b"\n\n"  # a truncated JSON event
        if pos == f.disconnect_at:
            self._send(b"".join(frames), 1, seq.group)
            self.closed = True
            self.transport.close()
            self.on_disconnect(seq.group)
            return True
        if pos == f.stall_at and self.held is None and self.stall_s > 0:
            self._send(b"".join(frames), 1, seq.group)
            frames.clear()
            self.held = []
            asyncio.get_running_loop().call_later(self.stall_s, self._release)
        return False

    def _release(self) -> None:
        held, self.held = self.held or [], None
        if held:
            self._send(b"".join(held), self.held_tokens, None)
        self.held_tokens = 0
        if self.finish_after_release is not None:
            self.on_group_done(self.finish_after_release, perf_ns())

    def _send(self, data: bytes, tokens: int, group: RequestGroup | None) -> None:
        if not data or self.closed:
            return
        if self.held is not None:
            self.held.append(data)
            self.held_tokens += tokens
            return
        transport = self.transport
        if transport.is_closing():
            self.closed = True
            if group is not None:
                self.on_disconnect(group)
            return
        transport.write(b"%x\r\n%b\r\n" % (len(data), data))
        if tokens and self.stamps is not None:
            self.stamps.stamp(perf_ns(), wall_ns(), tokens)

    def on_group_done(self, group: RequestGroup, now_ns: int) -> None:
        if self.held is not None:
            self.finish_after_release = group
            return
        tail = b""
        if self.include_usage:
            cached = None if self.cached_tokens is None else self.cached_tokens(group)
            tail = self.writer.usage(group.prompt_tokens, group.completion_tokens, cached)
        self._send(tail + DONE, 0, None)
        if not self.done.done():
            self.done.set_result(None)

    def on_aborted(self) -> None:
        if not self.closed:
            self.closed = True
            self.transport.close()  # an unfinished stream must not look complete to the client
        if not self.done.done():
            self.done.set_result(None)
