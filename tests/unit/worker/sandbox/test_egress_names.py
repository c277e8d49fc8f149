"""The setup proxy decides by the host it connects to: a plain-HTTP request's Host header
and a tunnel's TLS server name (SNI) must name that host, or the request is refused
and recorded. A shared CDN routes by those names, not by the address the proxy
checked, so a mismatch would reach another site behind it.

The real proxy over its real unix socket; the allowed registry is a recording TCP
server on 127.0.0.1 (name resolution is replaced for the two test names, so nothing
leaves the machine). The upstream reads until the proxy closes its side, so what it
recorded is everything the proxy forwarded, with no waiting on time."""

from __future__ import annotations

import http.client
import queue
import socket
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.unit.worker.sandbox.test_tlshello import message, real_hello, records, sni, split_hello
from worker.sandbox import egress
from worker.sandbox.egress import (
    DUPLICATE_HOST,
    ENCRYPTED_HELLO,
    HOST_MISMATCH,
    MALFORMED_HEADER,
    NO_SNI,
    SECOND_REQUEST,
    SEVERAL_SNI,
    SNI_MISMATCH,
    USERINFO,
    EgressProxy,
)
from worker.sandbox.egress_policy import EgressPolicy, refusal_kind
from worker.sandbox.tlshello import HELLO_RETRY_RANDOM, NOT_TLS, TOO_LARGE

REGISTRY = "registry.test"  # allowed; resolves to the recording upstream
INDEX_PORT = 3141  # a private index's plain-HTTP port, allowed beside 80
_TLS_ALERT = 0x15


def _server_hello(random: bytes) -> bytes:
    """The start of a server's first flight: enough of a ServerHello for the proxy to
    tell a HelloRetryRequest (``random`` is HELLO_RETRY_RANDOM) from any other."""
    body = b"\x03\x03" + random
    return b"\x16\x03\x03\x00\x26\x02\x00\x00\x22" + body


SERVER_HELLO = _server_hello(b"\x11" * 32)
HELLO_RETRY = _server_hello(HELLO_RETRY_RANDOM)
CHANGE_CIPHER_SPEC = b"\x14\x03\x03\x00\x01\x01"


class Upstream:
    """A TCP server on 127.0.0.1 that sends its ``greeting`` (a TLS server's first
    bytes, for tunnels), records per connection every byte it received until the proxy
    closed its side (or, with ``one_head``, until a request's head), then answers."""

    def __init__(self) -> None:
        self.greeting = b""
        self.answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
        self.one_head = False
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.received: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        with conn:
            chunks = []
            try:
                conn.sendall(self.greeting)
                while chunk := conn.recv(65536):
                    chunks.append(chunk)
                    if self.one_head and b"\r\n\r\n" in b"".join(chunks):
                        break
                conn.sendall(self.answer)
            except OSError:
                pass
            self.received.put(b"".join(chunks))

    def next(self) -> bytes:
        return self.received.get(timeout=30)

    def assert_idle(self) -> None:
        assert self.received.empty()


@pytest.fixture
def upstream(monkeypatch: pytest.MonkeyPatch) -> Iterator[Upstream]:
    up = Upstream()
    real = socket.getaddrinfo

    def resolve(host: str, port: int, *args: object, **kwargs: object) -> object:
        if host.lower().rstrip(".") in (REGISTRY, "127.0.0.1"):
            return real("127.0.0.1", up.port, *args, **kwargs)  # type: ignore[arg-type]
        raise socket.gaierror(f"{host}: not resolved in this test")

    monkeypatch.setattr(egress.socket, "getaddrinfo", resolve)
    yield up
    up.server.close()


@pytest.fixture
def proxy(tmp_path: Path, upstream: Upstream) -> Iterator[EgressProxy]:
    # Trusted, so the loopback address the names resolve to is allowed.
    policy = EgressPolicy(
        hosts=(REGISTRY, "127.0.0.1"),
        trusted=(REGISTRY, "127.0.0.1"),
        http_ports=(80, INDEX_PORT),
    )
    with EgressProxy(tmp_path, policy) as p:
        yield p
    # Every refusal these tests provoke has a kind the setup-refusal metric can name
    # (worker/metrics.py record_setup_refusals): a new reason needs its REFUSAL_KINDS entry.
    assert [b.reason for b in p.blocked if refusal_kind(b.reason) == "other"] == []


def _connect(proxy: EgressProxy) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(30)
    s.connect(str(proxy.socket_path))
    return s


def _read_all(s: socket.socket) -> bytes:
    chunks = []
    while chunk := s.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def _http(proxy: EgressProxy, request: bytes) -> bytes:
    with _connect(proxy) as s:
        s.sendall(request)
        s.shutdown(socket.SHUT_WR)
        return _read_all(s)


def _reasons(proxy: EgressProxy) -> list[str]:
    return [b.reason for b in proxy.blocked]


# -- plain HTTP: the Host header -------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "host"),
    [
        (f"http://{REGISTRY}/simple/", REGISTRY),
        (f"http://{REGISTRY}/simple/", "Registry.TEST"),
        (f"http://{REGISTRY}/simple/", f"{REGISTRY}."),
        (f"http://{REGISTRY}/simple/", f"{REGISTRY}:80"),
        (f"http://{REGISTRY}/simple/", f" {REGISTRY.upper()}.:80\t"),
        (f"http://{REGISTRY}:80/simple/", REGISTRY),
        ("http://REGISTRY.test./simple/", REGISTRY),
        (f"http://{REGISTRY}:{INDEX_PORT}/simple/", f"{REGISTRY}:{INDEX_PORT}"),
        (f"http://{REGISTRY}:{INDEX_PORT}/simple/", f"{REGISTRY}:0{INDEX_PORT}"),
    ],
)
def test_a_host_header_naming_the_url_host_goes_through(
    proxy: EgressProxy, upstream: Upstream, url: str, host: str
) -> None:
    reply = _http(
        proxy,
        f"GET {url} HTTP/1.1\r\nHost: {host}\r\nProxy-Authorization: x\r\n"
        "Connection: keep-alive\r\n\r\n".encode(),
    )
    assert reply.endswith(b"\r\n\r\nok"), reply
    sent = upstream.next()
    assert sent.startswith(b"GET /simple/ HTTP/1.1\r\n")
    assert f"\r\nHost: {host}\r\n".encode() in sent
    # The upstream closes after this one request; the proxy's credentials stay here.
    assert sent.endswith(b"\r\nConnection: close\r\n\r\n")
    assert b"Proxy-Authorization" not in sent and b"keep-alive" not in sent
    assert proxy.blocked == ()


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (f"http://{REGISTRY}/simple/", REGISTRY),
        ("http://REGISTRY.test./simple/", "registry.test."),
        (f"http://{REGISTRY}:{INDEX_PORT}/simple/", f"{REGISTRY}:{INDEX_PORT}"),
        ("http://127.0.0.1/simple/", "127.0.0.1"),
    ],
)
def test_a_missing_host_header_is_filled_from_the_url(
    proxy: EgressProxy, upstream: Upstream, url: str, expected: str
) -> None:
    reply = _http(proxy, f"GET {url} HTTP/1.0\r\nAccept: */*\r\n\r\n".encode())
    assert reply.endswith(b"ok")
    sent = upstream.next()
    assert (
        sent
        == (
            f"GET /simple/ HTTP/1.0\r\nHost: {expected}\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        ).encode()
    )


@pytest.mark.parametrize(
    "host",
    [
        "example.com",
        f"{REGISTRY}.example.com",
        f"example.com.{REGISTRY}",
        f"x{REGISTRY}",
        f"{REGISTRY}:8080",  # the port counts: another virtual host
        f"{REGISTRY}:{INDEX_PORT}",  # the URL says port 80
        f"{REGISTRY}:",
        f"{REGISTRY}:80:80",
        f"{REGISTRY}:99999999",
        f"{REGISTRY}@example.com",
        f"example.com@{REGISTRY}",
        f"example.com#{REGISTRY}",
        f"example.com/{REGISTRY}",
        f"{REGISTRY} example.com",
        f"{REGISTRY},example.com",
        f"{REGISTRY}%2eexample.com",
        "[::1]",
        "",
        "régistry.test",
    ],
)
def test_a_host_header_naming_another_host_is_refused_and_recorded(
    proxy: EgressProxy, upstream: Upstream, host: str
) -> None:
    reply = _http(
        proxy, f"GET http://{REGISTRY}/simple/ HTTP/1.1\r\nHost: {host}\r\n\r\n".encode("latin-1")
    )
    assert reply.startswith(b"HTTP/1.1 403")
    [blocked] = proxy.blocked
    assert (blocked.method, blocked.host, blocked.port) == ("GET", REGISTRY, 80)
    assert blocked.reason.startswith(f"{HOST_MISMATCH}: ")
    upstream.assert_idle()  # refused before anything was connected


def test_the_forged_host_is_shown_in_the_record_but_cannot_break_out_of_it(
    proxy: EgressProxy,
) -> None:
    _http(proxy, f"GET http://{REGISTRY}/ HTTP/1.1\r\nHost: example.com\r\n\r\n".encode())
    _http(proxy, f"GET http://{REGISTRY}/ HTTP/1.1\r\nHost: `[x](//e.c)` @a\r\n\r\n".encode())
    assert _reasons(proxy) == [
        f"{HOST_MISMATCH}: example.com",
        f"{HOST_MISMATCH}: ?[x]???e.c????a",
    ]
    assert "host header mismatch" in proxy.blocked[0].describe()


@pytest.mark.parametrize(
    "headers",
    [
        f"Host: {REGISTRY}\r\nHost: example.com",
        f"Host: example.com\r\nHost: {REGISTRY}",
        f"Host: {REGISTRY}\r\nHost: {REGISTRY}",
        f"Host: {REGISTRY}\r\nAccept: */*\r\nhOST: example.com",
    ],
)
def test_duplicate_host_headers_are_refused_and_recorded(
    proxy: EgressProxy, upstream: Upstream, headers: str
) -> None:
    reply = _http(proxy, f"GET http://{REGISTRY}/ HTTP/1.1\r\n{headers}\r\n\r\n".encode())
    assert reply.startswith(b"HTTP/1.1 403")
    assert _reasons(proxy) == [DUPLICATE_HOST]
    upstream.assert_idle()


@pytest.mark.parametrize(
    "headers",
    [
        f"Host: {REGISTRY}\r\nHost : example.com",  # space before the colon
        f"Host: {REGISTRY}\r\nHost\t: example.com",
        f"Host: {REGISTRY}\r\nX-Note: a\nHost: example.com",  # bare LF
        f"Host: {REGISTRY}\r\nX-Note: a\rHost: example.com",  # bare CR
        f"Host: {REGISTRY}\r\nX-Note: a\x00Host: example.com",
        f"Host: {REGISTRY}\r\nX-Note: a\r\n Host: example.com",  # folded line
        f"X-Note: a\r\n\tHost: example.com\r\nHost: {REGISTRY}",
        f"Host: {REGISTRY}\r\nno colon here",
        f"Proxy-Note: a\r\n Host: example.com\r\nHost: {REGISTRY}",
    ],
)
def test_header_lines_servers_could_split_differently_are_refused(
    proxy: EgressProxy, upstream: Upstream, headers: str
) -> None:
    reply = _http(proxy, f"GET http://{REGISTRY}/ HTTP/1.1\r\n{headers}\r\n\r\n".encode())
    assert reply.startswith(b"HTTP/1.1 403")
    assert _reasons(proxy) == [MALFORMED_HEADER]
    upstream.assert_idle()


@pytest.mark.parametrize(
    "url",
    [
        f"http://user@{REGISTRY}/",
        f"http://user:pass@{REGISTRY}/",
        f"http://example.com@{REGISTRY}/",
        f"http://@{REGISTRY}/",
        f"http://{REGISTRY}@example.com/",
    ],
)
def test_userinfo_in_the_url_is_refused_and_recorded(
    proxy: EgressProxy, upstream: Upstream, url: str
) -> None:
    reply = _http(proxy, f"GET {url} HTTP/1.1\r\nHost: {REGISTRY}\r\n\r\n".encode())
    assert reply.startswith(b"HTTP/1.1 403")
    assert _reasons(proxy) == [USERINFO]
    upstream.assert_idle()


def test_a_second_request_on_the_connection_never_reaches_the_upstream(
    proxy: EgressProxy, upstream: Upstream
) -> None:
    first = f"GET http://{REGISTRY}/a HTTP/1.1\r\nHost: {REGISTRY}\r\n\r\n".encode()
    second = b"GET /b HTTP/1.1\r\nHost: example.com\r\n\r\n"
    # Pipelined with the head, and sent after it.
    assert _http(proxy, first + second).endswith(b"ok")
    assert upstream.next() == (
        f"GET /a HTTP/1.1\r\nHost: {REGISTRY}\r\nConnection: close\r\n\r\n".encode()
    )
    with _connect(proxy) as s:
        s.sendall(first)
        s.sendall(second)
        s.shutdown(socket.SHUT_WR)
        assert _read_all(s).endswith(b"ok")
    assert b"example.com" not in upstream.next()
    assert _reasons(proxy) == [SECOND_REQUEST]


def test_a_request_body_is_forwarded_and_nothing_after_it(
    proxy: EgressProxy, upstream: Upstream
) -> None:
    head = f"POST http://{REGISTRY}/up HTTP/1.1\r\nHost: {REGISTRY}\r\nContent-Length: 5\r\n\r\n"
    assert _http(proxy, head.encode() + b"hello").endswith(b"ok")
    assert upstream.next().endswith(b"Connection: close\r\n\r\nhello")
    assert proxy.blocked == ()
    extra = b"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n"
    assert _http(proxy, head.encode() + b"hello" + extra).endswith(b"ok")
    assert upstream.next().endswith(b"\r\n\r\nhello")
    assert _reasons(proxy) == [SECOND_REQUEST]


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (
            b"HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\n"
            b"Content-Length: 2\r\n\r\nok",
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
        ),
        (
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n",
            b"HTTP/1.1 100 Continue\r\n\r\n"
            b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        ),
        # Not a whole HTTP head: passed on as it came.
        (b"HTTP/1.1 200 OK\r\nContent-", b"HTTP/1.1 200 OK\r\nContent-"),
        (b"SSH-2.0-x\r\n\r\nrest", b"SSH-2.0-x\r\n\r\nrest"),
    ],
)
def test_the_response_tells_the_client_the_connection_closes(
    proxy: EgressProxy, upstream: Upstream, answer: bytes, expected: bytes
) -> None:
    upstream.answer = answer
    reply = _http(proxy, f"GET http://{REGISTRY}/ HTTP/1.1\r\nHost: {REGISTRY}\r\n\r\n".encode())
    assert reply == expected


def test_a_client_that_keeps_connections_alive_is_not_reported(
    proxy: EgressProxy, upstream: Upstream
) -> None:
    class ViaProxy(http.client.HTTPConnection):
        def connect(self) -> None:
            self.sock = _connect(proxy)

    upstream.one_head = True  # answers without waiting for the end of the stream
    client = ViaProxy("proxy.invalid")
    for path in ("/a", "/b", "/c"):
        client.request("GET", f"http://{REGISTRY}{path}")
        assert client.getresponse().read() == b"ok"
        upstream.next()
    client.close()
    assert proxy.blocked == () and proxy.allowed_count == 3


@pytest.mark.parametrize(
    "framing",
    [
        "Transfer-Encoding: chunked",
        "Content-Length: 5\r\nContent-Length: 50",
        "Content-Length: -1",
        "Content-Length: 5, 5",
    ],
)
def test_body_framing_the_proxy_cannot_count_is_refused(
    proxy: EgressProxy, upstream: Upstream, framing: str
) -> None:
    request = f"POST http://{REGISTRY}/ HTTP/1.1\r\nHost: {REGISTRY}\r\n{framing}\r\n\r\nhello"
    assert _http(proxy, request.encode()).startswith(b"HTTP/1.1 403")
    assert _reasons(proxy) == ["request body framing"]
    upstream.assert_idle()


# -- CONNECT: the TLS server name ------------------------------------------------------


@dataclass
class Tunnel:
    reply: bytes  # what the client read back after its hello
    upstream: bytes  # every byte the proxy forwarded upstream


def _tunnel(
    proxy: EgressProxy,
    upstream: Upstream,
    first: bytes,
    *,
    target: str = f"{REGISTRY}:443",
    pieces: int = 1,
    with_head: bool = False,
    greeting: bytes = SERVER_HELLO,
) -> Tunnel:
    """CONNECT ``target``, then send ``first`` (in ``pieces`` writes, or pipelined
    with the CONNECT head) and end the stream; the upstream speaks ``greeting`` first."""
    upstream.greeting = greeting
    head = f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode()
    with _connect(proxy) as s:
        if with_head:
            s.sendall(head + first)
        else:
            s.sendall(head)
            established = b""
            while not established.endswith(b"\r\n\r\n"):
                established += s.recv(1)
            assert established.startswith(b"HTTP/1.1 200"), established
            step = -(-len(first) // pieces)
            for at in range(0, len(first), step):
                s.sendall(first[at : at + step])
        s.shutdown(socket.SHUT_WR)
        reply = _read_all(s)
    if with_head:
        assert reply.startswith(b"HTTP/1.1 200 Connection established\r\n\r\n")
        reply = reply.split(b"\r\n\r\n", 1)[1]
    return Tunnel(reply, upstream.next())


@pytest.mark.parametrize("pieces", [1, 3, 40])
def test_a_hello_naming_the_connect_host_is_tunnelled(
    proxy: EgressProxy, upstream: Upstream, pieces: int
) -> None:
    hello = real_hello(REGISTRY)
    done = _tunnel(proxy, upstream, hello + b"\x17\x03\x03\x00\x01\x00", pieces=pieces)
    assert done.upstream == hello + b"\x17\x03\x03\x00\x01\x00"
    assert done.reply.endswith(b"ok")
    assert proxy.blocked == () and proxy.allowed_count == 1


@pytest.mark.parametrize(
    ("target", "name"),
    [
        (f"{REGISTRY}:443", "Registry.TEST"),
        ("REGISTRY.test.:443", REGISTRY),
        (f"{REGISTRY}.:443", f"{REGISTRY}."),
        (REGISTRY, REGISTRY),  # port 443 by default
    ],
)
def test_names_compare_without_case_or_a_trailing_dot(
    proxy: EgressProxy, upstream: Upstream, target: str, name: str
) -> None:
    hello = _with_name(name)
    done = _tunnel(proxy, upstream, hello, target=target)
    assert done.upstream == hello
    assert proxy.blocked == ()


def _with_name(name: str) -> bytes:
    """A real hello whose server_name entry is ``name`` exactly (Python's ssl may refuse
    to send some spellings, a trailing dot among them)."""
    head, extensions = split_hello(real_hello("placeholder.test"))
    return records(message(head, [(k, sni(name.encode()) if k == 0 else d) for k, d in extensions]))


def test_a_hello_naming_another_host_is_refused_before_a_byte_goes_upstream(
    proxy: EgressProxy, upstream: Upstream
) -> None:
    done = _tunnel(proxy, upstream, real_hello("example.com"))
    assert done.upstream == b""
    assert done.reply[0] == _TLS_ALERT  # the client is told in its own protocol
    [blocked] = proxy.blocked
    assert (blocked.method, blocked.host, blocked.port) == ("CONNECT", REGISTRY, 443)
    assert blocked.reason == f"{SNI_MISMATCH}: example.com"
    assert proxy.allowed_count == 0


@pytest.mark.parametrize(
    ("hello", "reason"),
    [
        (real_hello("example.com"), f"{SNI_MISMATCH}: example.com"),
        (_with_name(f"{REGISTRY}.example.com"), f"{SNI_MISMATCH}: {REGISTRY}.example.com"),
        (_with_name(f"x{REGISTRY}"), f"{SNI_MISMATCH}: x{REGISTRY}"),
        (_with_name("127.0.0.1"), f"{SNI_MISMATCH}: 127.0.0.1"),
        # The forged name sits in a later record of a fragmented hello.
        (
            records(message(*split_hello(real_hello("example.com"))), size=16),
            "sni mismatch: example.com",
        ),
    ],
)
def test_forged_names_are_refused_however_they_arrive(
    proxy: EgressProxy, upstream: Upstream, hello: bytes, reason: str
) -> None:
    # Sent with the CONNECT head, before the tunnel was confirmed: still read first.
    done = _tunnel(proxy, upstream, hello, with_head=True)
    assert done.upstream == b""
    assert _reasons(proxy) == [reason]


def _no_sni_hello() -> bytes:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    client = context.wrap_bio(incoming, outgoing, server_hostname=None)
    with pytest.raises(ssl.SSLWantReadError):
        client.do_handshake()
    return outgoing.read()


def _extra_extension(kind: int) -> bytes:
    head, extensions = split_hello(real_hello(REGISTRY))
    return records(message(head, [*extensions, (kind, b"\x00" * 32)]))


def _two_names() -> bytes:
    head, extensions = split_hello(real_hello(REGISTRY))
    two = sni(REGISTRY.encode(), b"example.com")
    return records(message(head, [(k, two if k == 0 else d) for k, d in extensions]))


@pytest.mark.parametrize(
    ("first", "reason"),
    [
        (_no_sni_hello(), NO_SNI),
        (_two_names(), f"{SEVERAL_SNI}: {REGISTRY}?example.com"),
        (_extra_extension(0xFE0D), ENCRYPTED_HELLO),
        (b"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n", NOT_TLS),
        (b"\x16\x03\x01\x00\x04\x01\x7f\xff\xff", TOO_LARGE),
        (real_hello(REGISTRY)[:5] + b"\x02" + real_hello(REGISTRY)[6:], "bad client hello"),
    ],
)
def test_hellos_the_proxy_cannot_match_to_the_host_are_refused_and_recorded(
    proxy: EgressProxy, upstream: Upstream, first: bytes, reason: str
) -> None:
    done = _tunnel(proxy, upstream, first)
    assert done.upstream == b""
    [blocked] = proxy.blocked
    assert blocked.reason.startswith(reason), blocked
    assert proxy.allowed_count == 0


def test_a_tunnel_closed_before_any_hello_forwards_nothing_and_records_nothing(
    proxy: EgressProxy, upstream: Upstream
) -> None:
    done = _tunnel(proxy, upstream, real_hello(REGISTRY)[:100])
    assert done.upstream == b"" and done.reply == b""
    assert proxy.blocked == ()


def test_a_tunnel_to_an_address_needs_no_name_but_may_not_carry_another(
    proxy: EgressProxy, upstream: Upstream
) -> None:
    hello = _no_sni_hello()
    assert _tunnel(proxy, upstream, hello, target="127.0.0.1:443").upstream == hello
    done = _tunnel(proxy, upstream, real_hello("example.com"), target="127.0.0.1:443")
    assert done.upstream == b""
    assert _reasons(proxy) == [f"{SNI_MISMATCH}: example.com"]


def _self_signed(tmp_path: Path, name: str) -> tuple[Path, Path]:
    pytest.importorskip("cryptography")
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(now - datetime.timedelta(days=3650))
        .not_valid_after(now + datetime.timedelta(days=3650))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


@pytest.mark.parametrize("retry", [False, True])
def test_a_real_tls_handshake_goes_through_the_checked_tunnel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, retry: bool
) -> None:
    cert, key = _self_signed(tmp_path, REGISTRY)
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(cert, key)
    if retry:
        # The client's first key share (X25519) is not one this server takes: it asks
        # for another with a HelloRetryRequest, and the client sends a second hello.
        server_context.set_ecdh_curve("prime256v1")
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        conn, _ = listener.accept()
        with server_context.wrap_socket(conn, server_side=True) as tls:
            request = b""
            while not request.endswith(b"\r\n\r\n"):
                request += tls.recv(4096)
            tls.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\nConnection: close\r\n\r\nsecret")

    threading.Thread(target=serve, daemon=True).start()
    real = socket.getaddrinfo
    monkeypatch.setattr(
        egress.socket,
        "getaddrinfo",
        lambda host, p, *a, **k: real("127.0.0.1", port, *a, **k),
    )
    policy = EgressPolicy(hosts=(REGISTRY,), trusted=(REGISTRY,))
    client_context = ssl.create_default_context(cafile=str(cert))
    with EgressProxy(tmp_path, policy) as proxy:
        with (
            _established(proxy) as raw,
            client_context.wrap_socket(raw, server_hostname=REGISTRY) as tls,
        ):
            tls.sendall(f"GET / HTTP/1.1\r\nHost: {REGISTRY}\r\n\r\n".encode())
            reply = b""
            while chunk := tls.recv(4096):
                reply += chunk
        assert reply.endswith(b"secret")
        # A client that names another site in the same tunnel hears a TLS alert.
        client_context.check_hostname = False
        with _established(proxy) as raw, pytest.raises(ssl.SSLError, match="ACCESS_DENIED"):
            client_context.wrap_socket(raw, server_hostname="example.com")
    assert _reasons(proxy) == [f"{SNI_MISMATCH}: example.com"]
    assert proxy.allowed_count == 1
    listener.close()


def _established(proxy: EgressProxy) -> socket.socket:
    raw = _connect(proxy)
    raw.sendall(f"CONNECT {REGISTRY}:443 HTTP/1.1\r\n\r\n".encode())
    established = b""
    while not established.endswith(b"\r\n\r\n"):
        established += raw.recv(1)
    assert established.startswith(b"HTTP/1.1 200")
    return raw


def test_a_second_hello_after_a_retry_request_must_name_the_host_too(
    proxy: EgressProxy, upstream: Upstream
) -> None:
    first = real_hello(REGISTRY)
    # Sent before the server asked for a retry, so it is held until the server has.
    forged = first + CHANGE_CIPHER_SPEC + real_hello("example.com")
    done = _tunnel(proxy, upstream, forged, greeting=HELLO_RETRY)
    assert done.upstream == first
    assert done.reply.startswith(HELLO_RETRY) and done.reply[len(HELLO_RETRY)] == _TLS_ALERT
    assert _reasons(proxy) == [f"{SNI_MISMATCH}: example.com"]


def test_a_second_hello_naming_the_host_goes_through(
    proxy: EgressProxy, upstream: Upstream
) -> None:
    both = real_hello(REGISTRY) + CHANGE_CIPHER_SPEC + real_hello(REGISTRY)
    done = _tunnel(proxy, upstream, both, pieces=9, greeting=HELLO_RETRY)
    assert done.upstream == both
    # Without a retry request, what follows the hello is the client's business.
    assert _tunnel(proxy, upstream, both).upstream == both
    assert proxy.blocked == ()
