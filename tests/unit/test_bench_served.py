"""The GPU script's served-path figures, computed from a stream: a fake OpenAI-compatible
server streams chat completions as vLLM and SGLang do (a role chunk, text chunks, a usage
chunk, ``[DONE]``), and a clock that ticks once per reading stands in for time, so every
figure is an exact count of chunks (no test here depends on timing)."""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from tests.benchmarks import bench_served
from tests.support import local_http

TOKENS_PER_CHUNK = 2  # servers may put several tokens in one chunk: usage counts them


class _FakeServer(BaseHTTPRequestHandler):
    requests: list[dict[str, Any]] = []
    with_usage = True

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._send(json.dumps({"data": [{"id": "frognano"}]}).encode(), "application/json")

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append(body)
        chunks = max(1, body["max_tokens"] // TOKENS_PER_CHUNK)
        events = [{"choices": [{"delta": {"role": "assistant"}}]}]
        events.append({"choices": [{"delta": {"reasoning_content": "fr"}}]})  # thinking first
        events += [{"choices": [{"delta": {"content": "og"}}]}] * (chunks - 1)
        if self.with_usage:
            usage = {"completion_tokens": chunks * TOKENS_PER_CHUNK, "prompt_tokens": 9}
            events.append({"choices": [], "usage": usage})
        payload = b"".join(f"data: {json.dumps(e)}\n\n".encode() for e in events)
        self._send(payload + b"data: [DONE]\n\n", "text/event-stream")

    def _send(self, payload: bytes, content_type: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@pytest.fixture
def served() -> Iterator[str]:
    _FakeServer.requests = []
    _FakeServer.with_usage = True
    with local_http(_FakeServer) as url:
        yield f"{url}/v1"


def ticks() -> bench_served.Clock:
    """A clock that advances one second per reading, safe across the streams' threads."""
    counter = itertools.count()
    lock = threading.Lock()

    def clock() -> float:
        with lock:
            return float(next(counter))

    return clock


def test_served_single_stream_figures_come_from_the_stream(served: str) -> None:
    figures = bench_served.stream_once(served, "frognano", 16, ticks())
    # start reads tick 0; the 8 text chunks read ticks 1..8 (the role chunk has no text).
    assert figures == bench_served.StreamFigures(tokens=16, first_token_s=1.0, last_token_s=8.0)
    assert figures.decode_tokens_per_s == pytest.approx(15 / 7)
    request = _FakeServer.requests[0]
    assert request["stream"] is True and request["stream_options"] == {"include_usage": True}
    assert request["ignore_eos"] is True and request["max_tokens"] == 16


def test_served_figures_count_chunks_without_usage(served: str) -> None:
    _FakeServer.with_usage = False
    figures = bench_served.stream_once(served, "frognano", 16, ticks())
    assert figures.tokens == 8  # one per text chunk when the server reports no usage


def test_served_report_lines(served: str) -> None:
    lines = bench_served.report(served, [3], 16, ceiling=4.0, clock=ticks())
    assert lines[0] == (
        f"served (frognano at {served}): time to first token 1000 ms; "
        f"decode, 1 stream: 2.1 tokens/s, 0.54x of the bandwidth ceiling"
    )
    # 3 streams x 16 tokens over 28 ticks: each stream reads the clock at its send and at
    # its 8 text chunks (27 readings), between the wall clock's start and end readings.
    assert lines[1] == "served, 3 stream(s): 1.7 tokens/s total (48 tokens)"
    assert [r["max_tokens"] for r in _FakeServer.requests] == [8, 16, 16, 16, 16]


def test_served_path_without_a_url_says_not_measured(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RIBBIT_BENCH_SERVED_URL", raising=False)
    assert bench_served.main([]) == 0
    out = capsys.readouterr().out
    assert out.startswith("served path (vLLM/SGLang): not measured: ")
    assert "tokens/s" not in out


def test_served_main_measures_the_url_it_is_given(
    served: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--url", served, "--streams", "2", "--new", "4", "--ceiling", "10"]
    assert bench_served.main(argv, clock=ticks()) == 0
    out = capsys.readouterr().out
    assert "decode, 1 stream: 3.0 tokens/s, 0.30x of the bandwidth ceiling" in out
    assert "served, 2 stream(s):" in out
