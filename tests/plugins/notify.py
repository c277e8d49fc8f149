"""A local Slack-compatible notification receiver on 127.0.0.1, real HTTP: what the bot's
outbound webhook posts is recorded as it arrives."""

from __future__ import annotations

import json
import queue
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from tests.support import local_http


class NotifyReceiver:
    """Bodies accepted so far, in order. Set ``status`` to an error to make the receiver
    refuse (and record nothing), as one that is down would. ``arrivals`` gets each accepted
    text too, for tests that wait on the next one instead of polling."""

    def __init__(self) -> None:
        self.status = 200
        self.bodies: list[dict[str, Any]] = []
        self.arrivals: queue.Queue[str] = queue.Queue()

    @property
    def texts(self) -> list[str]:
        return [b["text"] for b in self.bodies]


@pytest.fixture
def notify_receiver() -> Iterator[tuple[str, NotifyReceiver]]:
    """(the receiver's URL, what it received)."""
    state = NotifyReceiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if state.status == 200:
                state.bodies.append(body)
                state.arrivals.put(body["text"])
            self.send_response(state.status)
            self.end_headers()

        def log_message(self, *_args: Any) -> None:
            pass

    with local_http(Handler) as url:
        yield f"{url}/hook", state
