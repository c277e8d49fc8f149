"""The served path (vLLM or SGLang, `RIBBIT_MODEL__POLICY=openai`) measured from its
stream: ``python -m tests.benchmarks.bench_served --url http://host:8000/v1``.

Every figure comes from a streamed chat completion (``stream: true`` with usage in the
last chunk, as both servers send when asked): time to first token is the request's send
to the first chunk with text; single-stream decode is the tokens after the first over the
time from the first chunk with text to the last; N-stream throughput is every stream's
tokens over the wall time of N concurrent requests. ``ignore_eos`` (both servers accept
it) makes each stream generate exactly ``--new`` tokens, as the in-process benchmark does.
The single-stream rate is set against the batch-1 ceiling: device copy bandwidth over the
served weights' bytes (the 4B model in bf16 by default).

Without ``--url`` (or ``RIBBIT_BENCH_SERVED_URL``) nothing is measured: it prints
"not measured" and why (no server installed, or one installed but not started: a server
needs the real weights, which a lent machine does not carry). Prints figures, asserts
nothing.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass

Clock = Callable[[], float]
# FrogNano-4B: 4.21 B parameters in bf16 (trainer/README.md, "GPU figures").
FROGNANO_BF16_BYTES = 4.21e9 * 2
SERVERS = ("vllm", "sglang")


@dataclass(frozen=True)
class StreamFigures:
    """One streamed completion, timed on its chunks."""

    tokens: int  # completion tokens: the server's usage, else the chunks with text
    first_token_s: float  # send -> first chunk with text
    last_token_s: float  # send -> last chunk with text

    @property
    def decode_tokens_per_s(self) -> float:
        """Tokens after the first over the time they took: decode without prefill."""
        span = self.last_token_s - self.first_token_s
        return (self.tokens - 1) / span if self.tokens > 1 and span > 0 else float("nan")


def read_stream(lines: Iterable[bytes], start: float, clock: Clock) -> StreamFigures:
    """The figures of one server-sent-events chat-completion stream begun at ``start``."""
    first = last = float("nan")
    text_chunks = 0
    usage_tokens: int | None = None
    for raw in lines:
        line = raw.decode().strip()
        if not line.startswith("data:"):
            continue
        data = line[len("data:") :].strip()
        if data == "[DONE]":
            break
        chunk = json.loads(data)
        if chunk.get("usage"):
            usage_tokens = int(chunk["usage"]["completion_tokens"])
        if any(_has_text(choice.get("delta", {})) for choice in chunk.get("choices", [])):
            now = clock() - start
            first = now if text_chunks == 0 else first
            last = now
            text_chunks += 1
    tokens = usage_tokens if usage_tokens is not None else text_chunks
    return StreamFigures(tokens=tokens, first_token_s=first, last_token_s=last)


def _has_text(delta: dict[str, object]) -> bool:
    # A thinking model's first tokens arrive as reasoning_content (vLLM, SGLang).
    return bool(delta.get("content") or delta.get("reasoning_content"))


def stream_once(url: str, model: str, new: int, clock: Clock = time.perf_counter) -> StreamFigures:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "Write a long story about a frog."}],
        "max_tokens": new,
        "temperature": 0.0,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    request = urllib.request.Request(
        url.rstrip("/") + "/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    start = clock()
    with urllib.request.urlopen(request, timeout=600) as response:
        return read_stream(response, start, clock)


def served_model(url: str) -> str:
    """The first model the server lists (what it was started with)."""
    with urllib.request.urlopen(url.rstrip("/") + "/models", timeout=30) as response:
        return str(json.load(response)["data"][0]["id"])


def concurrent(url: str, model: str, n: int, new: int, clock: Clock) -> tuple[int, float]:
    """(tokens, wall seconds) of ``n`` streams run at once."""
    results: list[StreamFigures] = []
    lock = threading.Lock()

    def one() -> None:
        figures = stream_once(url, model, new, clock)
        with lock:
            results.append(figures)

    threads = [threading.Thread(target=one) for _ in range(n)]
    start = clock()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(r.tokens for r in results), clock() - start


def report(
    url: str, streams: list[int], new: int, ceiling: float, clock: Clock = time.perf_counter
) -> list[str]:
    """The served path's lines: time to first token, single-stream decode against the
    ceiling, and throughput at each width in ``streams``."""
    model = served_model(url)
    stream_once(url, model, 8, clock)  # warm-up: the server's first request compiles/captures
    one = stream_once(url, model, new, clock)
    line = (
        f"served ({model} at {url}): time to first token {one.first_token_s * 1000:.0f} ms; "
        f"decode, 1 stream: {one.decode_tokens_per_s:.1f} tokens/s"
    )
    if ceiling == ceiling:
        line += f", {one.decode_tokens_per_s / ceiling:.2f}x of the bandwidth ceiling"
    lines = [line]
    for n in streams:
        tokens, wall = concurrent(url, model, n, new, clock)
        lines.append(f"served, {n} stream(s): {tokens / wall:.1f} tokens/s total ({tokens} tokens)")
    return lines


def not_measured_reason() -> str:
    installed = [name for name in SERVERS if importlib.util.find_spec(name) is not None]
    if installed:
        return (
            f"{' and '.join(installed)} installed, but no server URL given "
            "(start it on the weights, then --url or RIBBIT_BENCH_SERVED_URL)"
        )
    return "neither vLLM nor SGLang is installed on this machine"


def batch1_ceiling(weight_bytes: float) -> float:
    """Copy bandwidth over the weights' bytes (nan without CUDA)."""
    import torch

    if not torch.cuda.is_available():
        return float("nan")
    from tests.benchmarks.bench_trainer_gpu import copy_bandwidth

    return copy_bandwidth(torch.device("cuda")) / weight_bytes


def main(argv: list[str] | None = None, clock: Clock = time.perf_counter) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=os.environ.get("RIBBIT_BENCH_SERVED_URL", ""))
    parser.add_argument("--streams", default="8,32", help="concurrent streams to measure")
    parser.add_argument("--new", type=int, default=128, help="tokens per stream")
    parser.add_argument("--weight-bytes", type=float, default=FROGNANO_BF16_BYTES)
    parser.add_argument("--ceiling", type=float, default=None, help="tokens/s (default: measured)")
    args = parser.parse_args(argv)
    if not args.url:
        print(f"served path (vLLM/SGLang): not measured: {not_measured_reason()}")
        return 0
    ceiling = args.ceiling if args.ceiling is not None else batch1_ceiling(args.weight_bytes)
    streams = [int(x) for x in args.streams.split(",") if x.strip()]
    for line in report(args.url, streams, args.new, ceiling, clock):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
