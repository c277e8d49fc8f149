"""The web server's stop (bot/web/serving.py): a real waitress server on a loopback port, run
on a thread, stopped the way SIGTERM stops it. No test measures time: each waits for a
state (a request inside the app, the listener closed, the loop returned) with a generous
bound that only a hang reaches."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pytest
import requests

from bot.web.serving import DrainingServer
from tests.plugins.e2e import wait_for

HANG_S = 30.0  # only a stop that never ends waits this long

StartResponse = Callable[[str, list[tuple[str, str]]], Any]


def hello(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "5")])
    return [b"hello"]


class Serving:
    def __init__(self, server: DrainingServer) -> None:
        self.server = server
        self.thread = threading.Thread(target=server.run, daemon=True)
        self.thread.start()

    @property
    def address(self) -> tuple[str, int]:
        return ("127.0.0.1", int(self.server.server.effective_port))

    def ended(self) -> bool:
        self.thread.join(HANG_S)
        return not self.thread.is_alive()


def _serve(app: Any, drain_s: float = HANG_S) -> Serving:
    return Serving(DrainingServer.create(app, drain_s=drain_s, host="127.0.0.1", port=0, threads=2))


def _refuses(address: tuple[str, int]) -> bool:
    try:
        socket.create_connection(address, timeout=5).close()
    except ConnectionRefusedError:
        return True
    except ConnectionResetError:  # queued in the backlog as the listener closed
        return False
    return False


@pytest.fixture
def serving() -> Iterator[list[Serving]]:
    started: list[Serving] = []
    yield started
    for s in started:  # a failed test must not leave a loop behind
        s.server.stop()
        s.thread.join(HANG_S)


def test_an_idle_keep_alive_connection_does_not_hold_the_stop(serving: list[Serving]) -> None:
    # What kept `ribbit serve` up after SIGTERM: waitress's loop ran while any connection
    # was open, and a client's pooled one stays open between requests.
    s = _serve(hello)
    serving.append(s)
    with requests.Session() as client:
        url = f"http://{s.address[0]}:{s.address[1]}/"
        assert client.get(url, timeout=HANG_S).text == "hello"
        s.server.stop()
        assert s.ended(), "the server kept serving an idle keep-alive connection"
    assert _refuses(s.address)


def test_a_request_in_flight_is_answered_and_idle_connections_closed(
    serving: list[Serving],
) -> None:
    # The response is larger than the socket buffers and waitress's high watermark, so
    # only the loop, still polling through the drain, can deliver all of it.
    big = b"x" * (32 << 20)
    inside, release = threading.Event(), threading.Event()

    def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        if environ["PATH_INFO"] != "/slow":
            return hello(environ, start_response)
        inside.set()
        release.wait(HANG_S)
        start_response("200 OK", [("Content-Length", str(len(big)))])
        return [big]

    s = _serve(app)
    serving.append(s)
    answers: list[requests.Response] = []
    client = threading.Thread(
        target=lambda: answers.append(
            requests.get(f"http://{s.address[0]}:{s.address[1]}/slow", timeout=HANG_S)
        )
    )
    with socket.create_connection(s.address, timeout=HANG_S) as idle:
        idle.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = b""
        while not answer.endswith(b"hello"):  # answered, and kept alive
            answer += idle.recv(4096)
        client.start()
        assert inside.wait(HANG_S)
        s.server.stop()
        # No new connection is accepted...
        wait_for(lambda: _refuses(s.address), HANG_S, "the listener closed")
        assert idle.recv(4096) == b""  # ...the idle one is closed, not left to send more...
    assert s.thread.is_alive()  # ...and the loop waits for the request in flight
    release.set()
    client.join(HANG_S)
    assert [(a.status_code, len(a.content)) for a in answers] == [(200, len(big))]
    assert s.ended()


def test_the_drain_deadline_cuts_a_request_that_never_finishes_arriving(
    serving: list[Serving],
) -> None:
    # A client trickling its headers in would hold the stop forever; drain_s bounds it
    # (zero here, so that nothing depends on how long a moment is).
    s = _serve(hello, drain_s=0.0)
    serving.append(s)
    with socket.create_connection(s.address, timeout=HANG_S) as trickle:
        trickle.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")  # the blank line never comes
        wait_for(
            lambda: any(c.request is not None for c in s.server.server.active_channels.values()),
            HANG_S,
            "the request partly read",
        )
        s.server.stop()
        assert s.ended()
        assert trickle.recv(1024) == b""  # cut, with no response


def test_stop_before_run_and_twice_is_harmless(serving: list[Serving]) -> None:
    server = DrainingServer.create(hello, host="127.0.0.1", port=0, threads=1)
    server.stop()
    server.stop()
    s = Serving(server)
    serving.append(s)
    assert s.ended()
    server.stop()  # after the loop closed its wake-up pipe
