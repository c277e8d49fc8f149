"""The server names in a TLS ClientHello, read from the first bytes a client sends.

The setup proxy (worker/sandbox/egress.py) tunnels ``CONNECT host:443`` only to
allow-listed registries, but a shared CDN routes a TLS connection by the ClientHello's
server_name (SNI), not by the address it arrived at: a tunnel to an allowed host
carrying another site's name would reach that site. So the proxy reads the ClientHello
before it forwards a byte, and this module parses it. Pure: bytes in, a verdict out; no
sockets, no policy (egress.py decides what a verdict means).

Only what a routing decision needs is checked strictly: the record and handshake
framing (a ClientHello split over several records is reassembled, since a parser that
read only the first record could be shown a different name than the server reads), the
server_name extension's own grammar, duplicate extensions, and whether the hello asks
for an encrypted inner hello (ECH), whose real server name the proxy cannot see.
``SecondHello`` follows the tunnel after that first hello, for the one other ClientHello
a client sends in the clear: the one a server's HelloRetryRequest asks for.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

# Bigger than any ClientHello a package manager sends (a post-quantum key share makes
# one about 2 KiB), small enough that a client cannot make the proxy buffer much.
HELLO_LIMIT = 64 * 1024

_HANDSHAKE = 0x16
_CLIENT_HELLO = 0x01
_RECORD_HEADER = 5
_MAX_RECORD = 2**14  # TLSPlaintext.length may not exceed this (RFC 8446, 5.1)
_EXT_SERVER_NAME = 0x0000
_HOST_NAME = 0x00
# encrypted_client_hello (RFC 9849) and the draft ESNI extension: the server would route
# by a name inside the encrypted part.
_EXT_ENCRYPTED = frozenset({0xFE0D, 0xFFCE})


@dataclass(frozen=True)
class ClientHello:
    """A complete, well-formed ClientHello: its host_name entries in the order sent
    (empty: no server_name extension) and whether it carries an encrypted hello."""

    server_names: tuple[str, ...]
    encrypted: bool = False
    end: int = field(default=0, compare=False)  # where its last record ends in the input


@dataclass(frozen=True)
class Incomplete:
    """The bytes so far are a valid start; more must be read before deciding."""


@dataclass(frozen=True)
class BadHello:
    """Not a ClientHello the proxy can judge; ``reason`` is recorded as the refusal."""

    reason: str


HelloVerdict = ClientHello | Incomplete | BadHello
NOT_TLS = "not tls"
TOO_LARGE = "client hello too large"


class _Malformed(Exception):
    pass


class _TooLarge(_Malformed):
    pass


def read_client_hello(data: bytes, limit: int = HELLO_LIMIT) -> HelloVerdict:
    """Judge the first bytes a client sent into a tunnel. ``Incomplete`` until the whole
    ClientHello has arrived; past ``limit`` bytes without one, ``BadHello``."""
    if not data:
        return Incomplete()
    if data[0] != _HANDSHAKE:
        return BadHello(NOT_TLS)
    try:
        found = _handshake_message(data, limit)
        if found is None:
            return BadHello(TOO_LARGE) if len(data) >= limit else Incomplete()
        message, end = found
        names, encrypted = _parse_hello(message)
        return ClientHello(names, encrypted, end)
    except _TooLarge:
        return BadHello(TOO_LARGE)
    except _Malformed as exc:
        return BadHello(f"bad client hello: {exc}")


def _handshake_message(data: bytes, limit: int) -> tuple[bytes, int] | None:
    """The first handshake message, reassembled from the records it spans, and where
    they end (None: not all of it has arrived). Records after it are the client's
    business."""
    fragments = bytearray()
    at = 0
    while True:
        if len(data) - at < _RECORD_HEADER:
            return None
        kind, major, minor = data[at], data[at + 1], data[at + 2]
        length = int.from_bytes(data[at + 3 : at + 5], "big")
        if kind != _HANDSHAKE:
            raise _Malformed("another record inside the client hello")
        if major != 3 or minor > 4:
            raise _Malformed("record version")
        if length == 0 or length > _MAX_RECORD:
            raise _Malformed("record length")
        if len(data) - at - _RECORD_HEADER < length:
            # Partial record: enough of it may already show the message is too long.
            fragments += data[at + _RECORD_HEADER :]
            _check_message_head(fragments, limit)
            return None
        fragments += data[at + _RECORD_HEADER : at + _RECORD_HEADER + length]
        at += _RECORD_HEADER + length
        size = _check_message_head(fragments, limit)
        if size is not None and len(fragments) >= size:
            if len(fragments) > size:
                # Nothing may follow a ClientHello in its records: a second message
                # there is one a server might read and this parser would not.
                raise _Malformed("data after the client hello")
            return bytes(fragments[4:]), at


def _check_message_head(fragments: bytearray | bytes, limit: int) -> int | None:
    """The full size of the handshake message (header included), once known."""
    if len(fragments) < 4:
        return None
    if fragments[0] != _CLIENT_HELLO:
        raise _Malformed("first handshake message is not a client hello")
    size = 4 + int.from_bytes(fragments[1:4], "big")
    if size > limit:
        raise _TooLarge
    return size


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.at = 0

    def take(self, n: int) -> bytes:
        if n > len(self.data) - self.at:
            raise _Malformed("truncated")
        out = self.data[self.at : self.at + n]
        self.at += n
        return out

    def number(self, n: int) -> int:
        return int.from_bytes(self.take(n), "big")

    def vector(self, length_bytes: int) -> bytes:
        return self.take(self.number(length_bytes))

    def done(self) -> bool:
        return self.at == len(self.data)


def _parse_hello(body: bytes) -> tuple[tuple[str, ...], bool]:
    r = _Reader(body)
    r.take(2 + 32)  # legacy_version, random
    if len(r.vector(1)) > 32:
        raise _Malformed("session id")
    suites = r.vector(2)
    if not suites or len(suites) % 2:
        raise _Malformed("cipher suites")
    if not r.vector(1):
        raise _Malformed("compression methods")
    if r.done():
        return (), False  # no extensions at all (old clients)
    extensions = _Reader(r.vector(2))
    if not r.done():
        raise _Malformed("data after the extensions")
    seen: set[int] = set()
    names: tuple[str, ...] = ()
    while not extensions.done():
        kind = extensions.number(2)
        data = extensions.vector(2)
        if kind in seen:
            # RFC 8446 4.2: a server must refuse it; one that did not might read the
            # other copy.
            raise _Malformed("duplicate extension")
        seen.add(kind)
        if kind == _EXT_SERVER_NAME:
            names = _server_names(data)
    return names, bool(seen & _EXT_ENCRYPTED)


def _server_names(data: bytes) -> tuple[str, ...]:
    outer = _Reader(data)
    entries = _Reader(outer.vector(2))
    if not outer.done() or entries.done():
        raise _Malformed("server name list")
    names: list[str] = []
    while not entries.done():
        kind = entries.number(1)
        raw = entries.vector(2)
        if kind != _HOST_NAME:
            raise _Malformed("server name of an unknown type")
        if not raw:
            raise _Malformed("empty server name")
        try:
            names.append(raw.decode("ascii"))
        except UnicodeDecodeError:
            raise _Malformed("server name is not ascii") from None
    return tuple(names)


# ServerHello.random of a HelloRetryRequest (RFC 8446, 4.1.3).
HELLO_RETRY_RANDOM = bytes.fromhex(
    "cf21ad74e59a6111be1d8c021e65b891c2a211167abb8c5e079e09e2c8a8339c"
)
_SERVER_HELLO = 0x02
_CHANGE_CIPHER_SPEC = 0x14


class SecondHello:
    """What a tunnel may forward after the client's first ClientHello, which was
    judged already. A TLS 1.3 server may answer it with a HelloRetryRequest, and the
    client then sends a second ClientHello in the clear: one naming another site would
    be read by the server as the first was not. So the client's bytes are held until the
    server's first handshake message shows whether it asked for a retry; if it did, the
    second hello must pass the same ``judge`` (a reason to refuse, or None). A client
    cannot slip its second hello in early: nothing it sends is forwarded before the
    server has answered the first.

    ``from_client`` and ``from_server`` take the bytes each side sent (the server's are
    the caller's to pass on unchanged) and return the client bytes that may now go
    upstream. Once ``refusal`` is set, the tunnel must close."""

    def __init__(self, judge: Callable[[HelloVerdict], str | None], limit: int = HELLO_LIMIT):
        self._judge = judge
        self._limit = limit
        self._server = b""
        self._held = b""
        self._state = "wait"  # wait (for the server), retry (check a 2nd hello), open
        self.refusal: str | None = None

    @property
    def open(self) -> bool:
        """Everything from the client goes upstream from now on."""
        return self._state == "open"

    def from_client(self, data: bytes) -> bytes:
        if self._state == "open":
            return data
        if self.refusal is not None:
            return b""
        self._held += data
        if len(self._held) > self._limit:
            self.refusal = TOO_LARGE
            return b""
        return self._check() if self._state == "retry" else b""

    def from_server(self, data: bytes) -> bytes:
        if self._state != "wait" or self.refusal is not None:
            return b""
        self._server += data[: self._limit]
        retry = _asks_retry(self._server)
        if retry is None:
            if len(self._server) >= self._limit:
                self.refusal = "server hello unreadable"
            return b""
        self._server = b""
        if retry:
            self._state = "retry"
            return self._check()
        return self._release()

    def _check(self) -> bytes:
        at = 0
        # The compatibility ChangeCipherSpec a client may send before its second hello.
        while len(self._held) - at >= _RECORD_HEADER and self._held[at] == _CHANGE_CIPHER_SPEC:
            at += _RECORD_HEADER + int.from_bytes(self._held[at + 3 : at + 5], "big")
        if len(self._held) - at < _RECORD_HEADER:
            return b""
        verdict = read_client_hello(self._held[at:], self._limit)
        if isinstance(verdict, Incomplete):
            return b""
        self.refusal = self._judge(verdict)
        return b"" if self.refusal is not None else self._release()

    def _release(self) -> bytes:
        self._state = "open"
        out, self._held = self._held, b""
        return out


def _asks_retry(data: bytes) -> bool | None:
    """Whether the server's first bytes are a HelloRetryRequest (None: too few yet).
    Anything but a ServerHello (an alert, not TLS at all) asks for nothing."""
    fragments = bytearray()
    at = 0
    while len(fragments) < 6 + 32:
        if len(data) - at < _RECORD_HEADER:
            return None
        if data[at] != _HANDSHAKE:
            return False
        length = int.from_bytes(data[at + 3 : at + 5], "big")
        fragments += data[at + _RECORD_HEADER : at + _RECORD_HEADER + length]
        if fragments and fragments[0] != _SERVER_HELLO:
            return False
        if len(data) - at - _RECORD_HEADER < length:
            if len(fragments) >= 6 + 32:
                break
            return None
        at += _RECORD_HEADER + length
    return bytes(fragments[6 : 6 + 32]) == HELLO_RETRY_RANDOM
