"""The plain-HTTP side of the setup proxy (worker/sandbox/egress.py): reading a
request's head off the client, the header grammar the proxy holds requests to (a
header line servers could split differently is refused, since a Host header could
hide there), the Host authority compared with the host the proxy connects to, the
one-request-per-connection gate, and the proxy's own replies. No policy: egress.py
decides what is allowed.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from collections.abc import Callable
from dataclasses import dataclass

HEAD_LIMIT = 16 * 1024
HEAD_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Request:
    method: str
    target: str
    version: str
    lines: tuple[bytes, ...]  # the header lines after the request line, as sent
    rest: bytes  # bytes the client sent after the head


def read_head(client: socket.socket) -> Request | None:
    client.settimeout(HEAD_TIMEOUT_S)
    buf = b""
    while b"\r\n\r\n" not in buf:
        if len(buf) > HEAD_LIMIT:
            client.sendall(reply(431, "request head too large"))
            return None
        chunk = client.recv(4096)
        if not chunk:
            return None
        buf += chunk
    client.settimeout(None)
    head, rest = buf.split(b"\r\n\r\n", 1)
    first, _, headers = head.partition(b"\r\n")
    fields = first.decode("latin-1").split()
    if len(fields) != 3:
        client.sendall(reply(400, "bad request line"))
        return None
    lines = tuple(headers.split(b"\r\n")) if headers else ()
    return Request(fields[0].upper(), fields[1], fields[2], lines, rest)


TOKEN = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
# Hop-by-hop headers the proxy sets itself: the client's would keep the upstream
# connection open for requests the proxy never read, or name the Host header as one an
# upstream proxy should drop.
HOP_BY_HOP = frozenset({"connection", "keep-alive"})


def header_fields(lines: tuple[bytes, ...]) -> list[tuple[str, str]] | None:
    """(lower-case name, value) for each header line; None when one is not a plain
    ``name: value`` line. A folded line, a bare CR or LF, a NUL or a space before the
    colon is where servers split headers differently from this proxy, so a Host header
    could hide there."""
    fields = []
    for line in lines:
        name, colon, value = line.partition(b":")
        if not colon or not TOKEN.fullmatch(name) or re.search(rb"[\r\n\x00]", value):
            return None
        fields.append((name.decode("ascii").lower(), value.decode("latin-1").strip(" \t")))
    return fields


# ASCII only: with IGNORECASE alone, [a-z] also matches the Kelvin sign and dotless i.
HOST_AUTHORITY = re.compile(r"[a-z0-9.-]+|[0-9a-f:.]+", re.IGNORECASE | re.ASCII)
_AUTHORITY = re.compile(
    r"(\[[0-9a-f:.]+\]|[a-z0-9.-]+)(?::([0-9]{1,5}))?", re.IGNORECASE | re.ASCII
)


def header_authority(value: str, default_port: int) -> tuple[str, int] | None:
    """A Host header's (host, port), normalised as ``normal_host`` does; None when it
    is not a plain host and port."""
    match = _AUTHORITY.fullmatch(value)
    if match is None:
        return None
    port = int(match[2]) if match[2] else default_port
    return normal_host(match[1].strip("[]")), port


def normal_host(host: str) -> str:
    return host.lower().rstrip(".")


def is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def shown(text: str) -> str:
    """Client-chosen text as it may appear in the job's report (Markdown in a PR body):
    host-name characters only, and not much of it."""
    return re.sub(r"[^A-Za-z0-9.:_\[\]-]", "?", text[:100])


def split_hostport(target: str, *, default: int) -> tuple[str, int]:
    host, sep, port = target.rpartition(":")
    if not sep or not port.isdigit():
        return target.strip("[]"), default
    return host.strip("[]"), int(port)


def reply(code: int, text: str) -> bytes:
    reasons = {400: "Bad Request", 403: "Forbidden", 431: "Too Large", 502: "Bad Gateway"}
    body = (text + "\n").encode()
    return (
        f"HTTP/1.1 {code} {reasons.get(code, 'Error')}\r\nContent-Type: text/plain\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode() + body


class OneRequest:
    """At most ``budget`` bytes from the client (a request's body); what comes after
    is dropped and reported to ``on_excess`` as it arrives. The response's head says
    ``Connection: close``, so a client that keeps connections alive opens a new one for
    its next request instead of sending it here to be dropped (and reported)."""

    refusal: str | None = None
    open = True

    def __init__(self, budget: int, on_excess: Callable[[], None]) -> None:
        self._budget = budget
        self._on_excess = on_excess
        self._response = b""  # the start of the response, until its final head is read
        self._passing = False

    def from_client(self, data: bytes) -> bytes:
        kept = data[: self._budget]
        self._budget -= len(kept)
        if len(kept) < len(data):
            self._on_excess()
        return kept

    def from_server(self, data: bytes) -> bytes:
        return b""

    def to_client(self, data: bytes) -> bytes:
        if self._passing:
            return data
        self._response += data
        out = b""
        while not self._passing:
            head, found, rest = self._response.partition(b"\r\n\r\n")
            if not found:
                if data and len(self._response) <= HEAD_LIMIT:
                    return out  # wait for the rest of the head
                self._passing = True  # no head to mend: passed on as it came
                return out + self._response
            if not head.startswith(b"HTTP/"):
                self._passing = True
                return out + self._response
            status = head[9:12]
            if status.startswith(b"1") and status != b"101":
                out += head + b"\r\n\r\n"  # an interim response; the final one follows
                self._response = rest
                continue
            lines = [
                line
                for line in head.split(b"\r\n")
                if line.partition(b":")[0].strip().lower() not in (b"connection", b"keep-alive")
            ]
            self._passing = True
            out += b"\r\n".join([*lines, b"Connection: close"]) + b"\r\n\r\n" + rest
        return out
