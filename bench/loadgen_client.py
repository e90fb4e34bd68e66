"""`make bench` (loadgen): the client's own speed and accuracy, measured against a fast server.

The client (loadgen's real code path, `run_benchmark`, on the event loop `loadgen run` uses: uvloop
when installed) is pinned to CPU 0; a purpose-built raw-asyncio server in another process is pinned
to CPU 1. The server spends little CPU per chunk (one global
decode tick writes a precomputed chunk to every active stream) and stamps the real send time of each
chunk (`perf_counter_ns()` right after `transport.write`, same CLOCK_MONOTONIC as the client).
Figures printed (nothing here is hard-coded; every number is measured on this machine):
  1. achieved vs asked rate and schedule-lag p99 at 100/200/400 req/s (32 tokens, TTFT 20 ms, 5 ms/token),
     client-measured TTFT minus the server's true first-token send time (p50, p99), client CPU ms/request,
     for each `--http-client` (aiohttp, raw);
  2. ITL error against the server's true send times with 64 streams (256 tokens at 2 ms);
  3. share of the server's token rate the client ingests with 64/256/1024 streams (256 tokens at 2 ms);
  4. memory under saturation: max RSS and its growth (MB/s over the second half of the run, up to its
     end: writing the record after it counts in the max, not the growth) with 256 and 1,024 streams
     of 256 tokens held for BENCH_SECONDS, beside the token rate and the run's `client_saturated`
     figures (time over the unparsed-backlog bound, peak backlog).
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing as mp
import os
import resource
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from multiprocessing.connection import Connection
from typing import Any

from loadgen.config import HTTP_CLIENTS, RunConfig
from loadgen.run.runner import run_benchmark
from loadgen.stats import percentile
from loadgen.targets.sim import DEFAULT_PERSONALITY
from loadgen.transport import evloop

CLIENT_CPU, SERVER_CPU = 0, 1
_CHUNK = (
    b'data: {"id":"cmpl-bench","object":"text_completion","created":1795979377,"model":"bench",'
    b'"choices":[{"index":0,"text":" tok","logprobs":null,"finish_reason":null,"stop_reason":null}]}\n\n'
)


def _chunked(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


TOKEN = _chunked(_CHUNK)
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
MODELS = json.dumps({"object": "list", "data": [{"id": "bench", "max_model_len": 4096}]}).encode()


@dataclass
class Stream:
    """One response being streamed; `stamps` are perf_counter_ns after each token write."""

    transport: asyncio.Transport
    rid: str
    n: int
    due_first: int
    stamps: list[int] = field(default_factory=list)


class FastServer:
    """Global decode tick every `itl_s`: one token to every stream whose first token is due."""

    def __init__(self, ttft_s: float, itl_s: float) -> None:
        self.ttft_ns, self.itl_s = int(ttft_s * 1e9), itl_s
        self.active: list[Stream] = []
        self.done: list[tuple[str, list[int]]] = []

    def request(self, transport: asyncio.Transport, head: bytes, body: bytes) -> None:
        line = head.split(b"\r\n", 1)[0]
        if line.startswith(b"GET /v1/models"):
            transport.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                % (len(MODELS), MODELS)
            )
            return
        if not line.startswith(b"POST"):
            transport.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
            return
        rid = ""
        for h in head.split(b"\r\n"):
            if h[:13].lower() == b"x-request-id:":
                rid = h[13:].strip().decode()
        n = int(json.loads(body).get("max_tokens", 16))
        transport.write(HEAD)
        self.active.append(Stream(transport, rid, n, time.perf_counter_ns() + self.ttft_ns))

    def tick(self) -> None:
        now, keep = time.perf_counter_ns(), []
        stamp = time.perf_counter_ns
        for s in self.active:
            if not s.stamps and now < s.due_first:
                keep.append(s)
                continue
            s.transport.write(TOKEN)
            s.stamps.append(stamp())
            if len(s.stamps) < s.n:
                keep.append(s)
                continue
            usage = {"choices": [], "usage": {"prompt_tokens": 32, "completion_tokens": s.n}}
            s.transport.write(
                _chunked(b"data: " + json.dumps(usage).encode() + b"\n\n")
                + _chunked(b"data: [DONE]\n\n")
                + b"0\r\n\r\n"
            )
            self.done.append((s.rid, s.stamps))
        self.active = keep


class _Conn(asyncio.Protocol):
    def __init__(self, server: FastServer) -> None:
        self.server, self.buf = server, b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while (cut := self.buf.find(b"\r\n\r\n")) >= 0:
            head, length = self.buf[:cut], 0
            for h in head.split(b"\r\n"):
                if h[:15].lower() == b"content-length:":
                    length = int(h[15:])
            if len(self.buf) < cut + 4 + length:
                return
            body, self.buf = self.buf[cut + 4 : cut + 4 + length], self.buf[cut + 4 + length :]
            assert self.transport is not None
            self.server.request(self.transport, head, body)


async def serve(
    conn: Connection, ttft_s: float, itl_s: float, port: int = 0, reuse_port: bool = False
) -> None:
    """Serve on 127.0.0.1:`port` (0: a free one, sent back over `conn`) until told to stop; "dump" sends
    the true send times so far. With `reuse_port`, several servers share one port (SO_REUSEPORT)."""
    loop = asyncio.get_running_loop()
    server = FastServer(ttft_s, itl_s)
    srv = await loop.create_server(
        lambda: _Conn(server), "127.0.0.1", port, backlog=4096, reuse_port=reuse_port or None
    )
    conn.send(srv.sockets[0].getsockname()[1])
    stop = asyncio.Event()

    def on_command() -> None:
        if conn.recv() == "dump":
            conn.send(server.done)
            server.done = []
        else:
            stop.set()

    loop.add_reader(conn.fileno(), on_command)
    next_tick = loop.time()
    while not stop.is_set():
        server.tick()
        next_tick = max(next_tick + itl_s, loop.time())
        await asyncio.sleep(next_tick - loop.time())
    srv.close()


def _server_main(conn: Connection, ttft_s: float, itl_s: float) -> None:
    os.sched_setaffinity(0, {SERVER_CPU})
    asyncio.run(serve(conn, ttft_s, itl_s))


class ServerProcess:
    """The fast server in its own process on its own core (context manager)."""

    def __init__(self, ttft_s: float, itl_s: float) -> None:
        self.parent, child = mp.Pipe()
        self.proc = mp.get_context("fork").Process(
            target=_server_main, args=(child, ttft_s, itl_s), daemon=True
        )

    def __enter__(self) -> ServerProcess:
        self.proc.start()
        self.url = f"http://127.0.0.1:{self.parent.recv()}"
        return self

    def dump(self) -> dict[str, list[int]]:
        self.parent.send("dump")
        return dict(self.parent.recv())

    def __exit__(self, *exc: object) -> None:
        self.parent.send("stop")
        self.proc.join(10)


def bench_config(url: str, out_dir: str, **kw: Any) -> RunConfig:
    """A run of the bench against its fast server: 32-token prompts, no linger, no error budget."""
    return RunConfig(
        target=DEFAULT_PERSONALITY,  # an engine preset: sends ignore_eos, as against vLLM
        base_url=url,
        model="bench",
        metrics_port=0,
        linger_s=0,
        results_dir=out_dir,
        input_len="fixed:32",
        max_error_rate=1.0,
        **kw,
    )


async def _client_run(url: str, out_dir: str, **kw: Any) -> tuple[Any, float, list[dict[str, Any]]]:
    config = bench_config(url, out_dir, **kw)
    before = resource.getrusage(resource.RUSAGE_SELF)
    result = await run_benchmark(config, progress=False)
    after = resource.getrusage(resource.RUSAGE_SELF)
    user_s, sys_s = after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime
    cpu_s = user_s + sys_s
    print(f"    (client CPU: user {user_s:.2f} s, system {sys_s:.2f} s)")
    lines = [json.loads(x) for x in (result.result_dir / "requests.jsonl").read_text().splitlines()]
    return result, cpu_s, lines


class RssSampler:
    """Samples this process's resident set size (/proc/self/statm) every `every_s` in a thread."""

    def __init__(self, every_s: float = 0.1) -> None:
        self.every_s, self.samples = every_s, []  # (wall-clock seconds, RSS bytes)
        self.page = os.sysconf("SC_PAGE_SIZE")
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self.done.wait(self.every_s):
            with open("/proc/self/statm") as fh:
                self.samples.append((time.time(), int(fh.read().split()[1]) * self.page))

    def __enter__(self) -> RssSampler:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.thread.join()

    def max_mb(self) -> float:
        """The largest RSS sampled, MB."""
        return max((rss for _, rss in self.samples), default=0) / 1e6

    def growth_mb_s(self, until: float | None = None) -> float:
        """Least-squares slope of RSS over the second half of the samples taken up to `until` (wall
        clock: the run's end, so writing its record is not counted as growth), MB/s (flat: about 0)."""
        kept = [x for x in self.samples if until is None or x[0] <= until]
        half = kept[len(kept) // 2 :]
        if len(half) < 2:
            return float("nan")
        mean_t = sum(t for t, _ in half) / len(half)
        mean_r = sum(r for _, r in half) / len(half)
        num = sum((t - mean_t) * (r - mean_r) for t, r in half)
        den = sum((t - mean_t) ** 2 for t, _ in half)
        return num / den / 1e6 if den else float("nan")


def _memory_child(
    conn: Connection, url: str, out_dir: str, client: str, streams: int, seconds: float
) -> None:
    """One memory measurement in a fresh interpreter (RSS freed by an earlier run is not given back)."""
    os.sched_setaffinity(0, {CLIENT_CPU})
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    config = bench_config(
        url,
        out_dir,
        duration_s=seconds,
        max_concurrency=streams,
        output_len="fixed:256",
        request_timeout_s=120.0,
        http_client=client,
    )
    with RssSampler() as rss:
        result = evloop.run(run_benchmark(config, progress=False))
    start_mb = rss.samples[0][1] / 1e6 if rss.samples else float("nan")
    sat = result.summary.get("client_saturated") or {}
    tok = result.summary["output_token_throughput"]
    ended = datetime.fromisoformat(result.summary["ended_at"].replace("Z", "+00:00")).timestamp()
    conn.send((tok, start_mb, rss.max_mb(), rss.growth_mb_s(until=ended), sat))


def memory_figures(out_dir: str, seconds: float) -> None:
    """Figure 4: max RSS and its growth with 256 and 1,024 streams held for `seconds`."""
    print(
        "client   streams  client_tok/s  rss_start_mb  max_rss_mb  rss_growth_mb/s  "
        "saturated_s  peak_backlog_req  peak_backlog_mb"
    )
    nan, spawn = float("nan"), mp.get_context("spawn")
    with ServerProcess(ttft_s=0.002, itl_s=0.002) as server:
        for client, streams in [(c, n) for c in HTTP_CLIENTS for n in (256, 1024)]:
            parent, child = spawn.Pipe()
            proc = spawn.Process(
                target=_memory_child, args=(child, server.url, out_dir, client, streams, seconds)
            )
            proc.start()
            tok, start_mb, max_mb, growth, sat = parent.recv()
            proc.join(30)
            server.dump()  # drop the server's stamps (not needed here)
            print(
                f"{client:<7}  {streams:>7}  {tok:12.0f}  {start_mb:12.0f}  {max_mb:10.0f}  {growth:15.1f}  "
                f"{sat.get('saturated_s', nan):11.1f}  {sat.get('peak_backlog_requests', -1):16d}  "
                f"{sat.get('peak_backlog_mb', nan):15.1f}"
            )


async def _loop_name() -> str:
    return evloop.loop_name()


def _p(values: list[float], q: float) -> float:
    return percentile(sorted(values), q) if values else float("nan")


def rate_figures(out_dir: str, seconds: float) -> None:
    """Figure 1: rate accuracy, schedule lag, TTFT error and CPU per request."""
    print(
        "client   rate  asked  achieved  err%   lag_p99_ms  ttft_err_p50_ms  ttft_err_p99_ms  cpu_ms/req  ok"
    )
    with ServerProcess(ttft_s=0.020, itl_s=0.005) as server:
        for client, rate in [(c, r) for c in HTTP_CLIENTS for r in (100, 200, 400)]:
            n = int(rate * seconds)
            result, cpu_s, lines = evloop.run(
                _client_run(
                    server.url,
                    out_dir,
                    rate=float(rate),
                    arrival="constant",
                    num_prompts=n,
                    output_len="fixed:32",
                    http_client=client,
                )
            )
            truth = server.dump()
            s = result.summary
            errs = [
                (x["first_token_ns"] - truth[x["x_request_id"]][0]) / 1e6
                for x in lines
                if x["first_token_ns"]
            ]
            achieved = s["achieved_rate"] or 0.0
            print(
                f"{client:<7}  {rate:>4}  {rate:>5}  {achieved:8.2f}  {100 * (achieved / rate - 1):+5.2f}  "
                f"{s['schedule_lag_s']['p99'] * 1e3:10.3f}  {_p(errs, 50):15.3f}  {_p(errs, 99):15.3f}  "
                f"{cpu_s * 1e3 / n:10.3f}  {s['requests']['ok']}/{n}"
            )


def stream_figures(out_dir: str) -> None:
    """Figures 2 and 3: ITL error with 64 streams; share of the server's token rate ingested."""
    print(
        "client   streams  server_tok/s  client_tok/s  share%  server_vs_nominal%  "
        "itl_err_p50_ms  itl_err_p99_ms"
    )
    with ServerProcess(ttft_s=0.002, itl_s=0.002) as server:
        for client, streams in [(c, n) for c in HTTP_CLIENTS for n in (64, 256, 1024)]:
            _, _, lines = evloop.run(
                _client_run(
                    server.url,
                    out_dir,
                    num_prompts=streams,
                    max_concurrency=streams,
                    output_len="fixed:256",
                    request_timeout_s=120.0,
                    http_client=client,
                )
            )
            truth = server.dump()
            tokens = sum(len(v) for v in truth.values())
            s_first, s_last = min(v[0] for v in truth.values()), max(v[-1] for v in truth.values())
            c_first = min(x["first_token_ns"] for x in lines)
            c_last = max(x["last_token_ns"] for x in lines)
            server_rate = tokens / ((s_last - s_first) / 1e9)
            client_rate = sum(x["output_tokens"] for x in lines) / ((c_last - c_first) / 1e9)
            itl_err = []
            for x in lines:
                t = truth[x["x_request_id"]]
                gaps = [(b - a) / 1e6 for a, b in zip(t, t[1:], strict=False)]
                itl_err += [abs(c * 1e3 - g) for c, g in zip(x["itl_s"], gaps, strict=False)]
            share, nominal = 100 * client_rate / server_rate, 100 * server_rate / (streams / 0.002)
            print(
                f"{client:<7}  {streams:>7}  {server_rate:12.0f}  {client_rate:12.0f}  {share:6.1f}  "
                f"{nominal:18.1f}  "
                f"{_p(itl_err, 50):14.3f}  {_p(itl_err, 99):14.3f}"
            )


async def _baseline_request(session: Any, url: str, rid: str, n: int) -> tuple[str, list[int]]:
    """A `vllm bench serve`-style request: iter_any reads, per-message json.loads, stamps at read return."""
    body = json.dumps({"model": "bench", "prompt": list(range(100, 132)), "max_tokens": n, "stream": True})
    stamps, buffer = [], ""
    async with session.post(url + "/v1/completions", data=body, headers={"X-Request-Id": rid}) as resp:
        async for chunk in resp.content.iter_any():
            t = time.perf_counter_ns()
            buffer += chunk.decode()
            while "\n\n" in buffer:
                message, buffer = buffer.split("\n\n", 1)
                data = message.strip().removeprefix("data: ")
                if data and data != "[DONE]" and json.loads(data).get("choices"):
                    stamps.append(t)
    return rid, stamps


async def _baseline_run(
    url: str, rate: float, n_requests: int, tokens: int, concurrency: int
) -> tuple[Any, ...]:
    import aiohttp

    lags, tasks = [], []
    slots = asyncio.Semaphore(concurrency)

    async def limited(rid: str) -> tuple[str, list[int]]:
        async with slots:
            return await _baseline_request(session, url, rid, tokens)

    before = resource.getrusage(resource.RUSAGE_SELF)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
        start = time.perf_counter_ns() + 5_000_000
        for i in range(n_requests):
            due = start + (int(i * 1e9 / rate) if rate else 0)
            await asyncio.sleep(max(0, due - time.perf_counter_ns()) / 1e9)
            lags.append((time.perf_counter_ns() - due) / 1e6)
            tasks.append(asyncio.create_task(limited(f"base-{i}")))
        results = await asyncio.gather(*tasks)
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return lags, dict(results), cpu_s


def baseline_figures(seconds: float) -> None:
    """The same measurements for a `vllm bench serve`-style aiohttp reader (vLLM itself is not installed)."""
    print("baseline (vllm-bench-style reader: iter_any + json.loads per message, stamps at read return):")
    with ServerProcess(ttft_s=0.020, itl_s=0.005) as server:
        n = int(400 * seconds)
        lags, stamps, cpu_s = asyncio.run(_baseline_run(server.url, 400.0, n, 32, n))
        truth = server.dump()
        errs = [(v[0] - truth[k][0]) / 1e6 for k, v in stamps.items() if v]
        ttft = f"ttft_err p50 {_p(errs, 50):.3f} / p99 {_p(errs, 99):.3f} ms"
        print(f"  400 req/s: lag_p99 {_p(lags, 99):.3f} ms  {ttft}  cpu {cpu_s * 1e3 / n:.3f} ms/req")
    with ServerProcess(ttft_s=0.002, itl_s=0.002) as server:
        _, stamps, _ = asyncio.run(_baseline_run(server.url, 0.0, 64, 256, 64))
        truth = server.dump()
        itl_err = []
        for rid, got in stamps.items():
            t = truth[rid]
            for i in range(1, min(len(got), len(t))):
                itl_err.append(abs((got[i] - got[i - 1]) - (t[i] - t[i - 1])) / 1e6)
        print(f"  64 streams: itl_err p50 {_p(itl_err, 50):.3f} / p99 {_p(itl_err, 99):.3f} ms")


def timer_floor() -> None:
    """The platform's own floor: how late a plain `time.sleep` wakes on the client's core."""
    late = []
    for _ in range(200):
        due = time.perf_counter_ns() + 5_000_000
        time.sleep(0.005)
        late.append((time.perf_counter_ns() - due) / 1e6)
    print(
        f"platform floor: time.sleep(5 ms) wakes late by p50 {_p(late, 50):.3f} ms, p99 {_p(late, 99):.3f} ms"
    )


def main() -> None:
    """Print the loadgen client figures (about a minute)."""
    if (os.cpu_count() or 1) < 2:
        print("needs 2 CPUs (client and server on separate cores); skipped")
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    os.sched_setaffinity(0, {CLIENT_CPU})
    seconds = float(os.environ.get("BENCH_SECONDS", "10"))
    print(f"client pinned to CPU {CLIENT_CPU}, server to CPU {SERVER_CPU}; {seconds:g} s per rate")
    loop = evloop.run(_loop_name())
    print(f"client event loop: {loop} (as `loadgen run`); server and baseline: asyncio")
    timer_floor()
    with tempfile.TemporaryDirectory() as out_dir:
        rate_figures(out_dir, seconds)
        stream_figures(out_dir)
        memory_figures(out_dir, seconds)
    baseline_figures(seconds)


if __name__ == "__main__":
    main()
