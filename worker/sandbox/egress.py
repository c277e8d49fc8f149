"""The setup phase's only way out: a registry-only proxy on the host, reached from inside
the sandbox through a unix socket.

Neither backend gives a sandbox a network interface (docker: ``network_mode="none"``,
bubblewrap: its own empty network namespace). For the setup step the host binds a
folder into the sandbox holding a unix socket this proxy listens on, and a tiny
forwarder started inside the sandbox (``FORWARDER``, run by the sandbox's own python3)
turns ``http://127.0.0.1:3128`` into that socket, so package managers' usual
``HTTPS_PROXY`` settings work unchanged. The proxy lets through ``CONNECT host:443``
(and plain-HTTP requests on port 80) to the allow-listed registry hosts only, connects
to the address it resolved and checked itself (no loopback, private or link-local
address unless the host is the deployment's own package index), and records every
request it refused so the job can report it. When the setup step ends the proxy stops
and the socket is removed: the agent and the tests that follow have no way out at all.

A shared CDN routes by the name a request carries, not by the address it arrived at,
so the proxy also decides by the names: a plain-HTTP request's ``Host`` header must
name the host and port it connects to (one request per connection, so a pipelined
second one cannot name another), and a tunnel's first bytes must be a TLS ClientHello
whose server name (SNI, worker/sandbox/tlshello.py) is the CONNECT host, or nothing is
forwarded. Inside the tunnel the HTTP ``Host`` header is encrypted: the proxy does not
terminate TLS, so it cannot see it (nor HTTP/2 requests for other names the upstream's
certificate covers); the name check is on the ClientHello alone.
"""

from __future__ import annotations

import contextlib
import re
import select
import socket
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit

from worker.sandbox.base import ClosedOnExit
from worker.sandbox.egress_policy import BlockedRequest, EgressPolicy
from worker.sandbox.proxyhttp import (
    HEAD_TIMEOUT_S,
    HOP_BY_HOP,
    HOST_AUTHORITY,
    TOKEN,
    OneRequest,
    Request,
    header_authority,
    header_fields,
    is_address,
    normal_host,
    read_head,
    reply,
    shown,
    split_hostport,
)
from worker.sandbox.tlshello import (
    NOT_TLS,
    BadHello,
    ClientHello,
    HelloVerdict,
    Incomplete,
    SecondHello,
    read_client_hello,
)

EGRESS_MOUNT = "/run/ribbit-egress"
SOCKET_NAME = "proxy.sock"
FORWARDER_NAME = "forward.py"
CA_NAME = "ca.pem"
PROXY_PORT = 3128
PROXY_URL = f"http://127.0.0.1:{PROXY_PORT}"
_CONNECT_TIMEOUT_S = 30.0
_IDLE_TIMEOUT_S = 300.0
_MAX_RECORDED = 200
_MAX_SOCKETS = 128  # client and upstream sockets open at once (64 tunnels)
# A fatal TLS alert (access_denied) for a client refused after its tunnel opened: it is
# speaking TLS by then, so an HTTP 403 would read as garbage.
_TLS_ACCESS_DENIED = b"\x15\x03\x03\x00\x02\x02\x31"

# Why the proxy refused a request, as the job's report shows it (the last ones are
# followed by what the client presented).
USERINFO = "userinfo in url"
MALFORMED_HEADER = "malformed header"
DUPLICATE_HOST = "duplicate host header"
SECOND_REQUEST = "second request on one connection"
ENCRYPTED_HELLO = "encrypted client hello"
NO_SNI = "no sni"
HOST_MISMATCH = "host header mismatch"
SNI_MISMATCH = "sni mismatch"
SEVERAL_SNI = "several sni names"

# Runs INSIDE the sandbox (its own python3, standard library only): listens on the
# sandbox's loopback and splices every connection to the host proxy's unix socket, then
# runs the setup command and exits with its status. Binding before the command starts
# means no client ever races the listener.
FORWARDER = f"""\
import socket, subprocess, sys, threading

SOCK, CMD = sys.argv[1], sys.argv[2:]
lsn = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
lsn.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
lsn.bind(("127.0.0.1", {PROXY_PORT}))
lsn.listen(64)


def pipe(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    for s in (dst, src):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def serve(conn):
    up = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        up.connect(SOCK)
    except OSError:
        conn.close()
        return
    threading.Thread(target=pipe, args=(conn, up), daemon=True).start()
    pipe(up, conn)


def accept():
    while True:
        conn, _ = lsn.accept()
        threading.Thread(target=serve, args=(conn,), daemon=True).start()


threading.Thread(target=accept, daemon=True).start()
code = subprocess.call(CMD)
sys.exit(128 - code if code < 0 else code)
"""


@dataclass
class _Log:
    blocked: list[BlockedRequest] = field(default_factory=list)
    allowed: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def refuse(self, item: BlockedRequest) -> None:
        # The method and host are the client's text, bound for a Markdown report.
        item = replace(item, method=shown(item.method), host=shown(item.host))
        with self.lock:
            if item not in self.blocked and len(self.blocked) < _MAX_RECORDED:
                self.blocked.append(item)


class EgressProxy(ClosedOnExit):
    """The host side: listens on ``<egress_dir>/proxy.sock`` while open. Used as a
    context manager around the setup step; closing it cuts every open tunnel."""

    def __init__(
        self, egress_dir: Path, policy: EgressPolicy, ca_bundle: Path | None = None
    ) -> None:
        self.policy = policy
        if ca_bundle is not None:
            (egress_dir / CA_NAME).write_bytes(ca_bundle.read_bytes())
            (egress_dir / CA_NAME).chmod(0o644)
        self.socket_path = egress_dir / SOCKET_NAME
        self._log = _Log()
        self._conns: set[socket.socket] = set()
        self._conns_lock = threading.Lock()
        self._stopping = threading.Event()
        (egress_dir / FORWARDER_NAME).write_text(FORWARDER)
        (egress_dir / FORWARDER_NAME).chmod(0o644)
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(str(self.socket_path))
        # The sandbox user is another uid on the host; the folder around the socket
        # (bound read-only, and only into this job's sandbox) is what guards it.
        self.socket_path.chmod(0o666)
        self._server.listen(64)
        self._thread = threading.Thread(target=self._accept_loop, daemon=True)
        self._thread.start()

    @property
    def blocked(self) -> tuple[BlockedRequest, ...]:
        with self._log.lock:
            return tuple(self._log.blocked)

    @property
    def allowed_count(self) -> int:
        return self._log.allowed

    def close(self) -> None:
        if self._stopping.is_set():
            return
        self._stopping.set()
        with contextlib.suppress(OSError):
            self._server.shutdown(socket.SHUT_RDWR)
        self._server.close()
        with self._conns_lock:
            for conn in list(self._conns):
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)
                conn.close()
        self._thread.join(timeout=5)
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()

    # -- serving -----------------------------------------------------------------------
    def _accept_loop(self) -> None:
        while not self._stopping.is_set():
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            with self._conns_lock:
                busy = len(self._conns) >= _MAX_SOCKETS
            if busy:
                # A thread per connection on the worker: the sandbox must not make
                # thousands of them.
                conn.close()
                continue
            self._track(conn)
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _track(self, conn: socket.socket) -> None:
        with self._conns_lock:
            if self._stopping.is_set():
                conn.close()
                return
            self._conns.add(conn)

    def _forget(self, *conns: socket.socket) -> None:
        with self._conns_lock:
            for conn in conns:
                self._conns.discard(conn)
                conn.close()

    def _handle(self, client: socket.socket) -> None:
        upstream: socket.socket | None = None
        try:
            request = read_head(client)
            if request is None:
                return
            route = self._route(request)
            if isinstance(route, bytes):
                client.sendall(route)
                return
            opened = self._connect(route.method, route.host, route.port)
            if isinstance(opened, bytes):
                client.sendall(opened)
                return
            upstream = opened
            self._track(upstream)
            if route.body is None:
                self._tunnel(client, upstream, request.rest, route)
                return
            self._count_allowed()
            # One request per connection: the upstream is told to close after it, and
            # what the client sends past its body (a second, pipelined request with a
            # Host of its choosing) never reaches it.
            extra = BlockedRequest(route.method, route.host, route.port, SECOND_REQUEST)
            gate = OneRequest(route.body, lambda: self._log.refuse(extra))
            upstream.sendall(route.head + gate.from_client(request.rest))
            _splice(client, upstream, gate)
        except OSError:
            pass
        finally:
            self._forget(client, *([upstream] if upstream is not None else []))

    def _route(self, request: Request) -> _Route | bytes:
        """Where ``request`` may go, checked before anything is connected; or the
        refusal owed to the client."""
        if request.method == "CONNECT":
            host, port = split_hostport(request.target, default=443)
            if port != 443:
                return self._refuse(request.method, host, port, "only port 443 is tunnelled")
            return _Route(request.method, host, port)
        try:
            parts = urlsplit(request.target)
            port = parts.port if parts.port is not None else 80
        except ValueError:  # a port that is not a number
            parts, port = urlsplit(""), 0
        if (
            parts.scheme != "http"
            or not parts.hostname
            or not HOST_AUTHORITY.fullmatch(parts.hostname)
            or not TOKEN.fullmatch(request.method.encode("latin-1", "replace"))
            or request.version not in ("HTTP/1.0", "HTTP/1.1")
        ):
            return self._refuse(request.method, request.target[:100], 0, "not a proxy request")
        method, host = request.method, parts.hostname
        if "@" in parts.netloc:
            # Which side of the "@" names the server is where URL parsers disagree.
            return self._refuse(method, host, port, USERINFO)
        if port not in self.policy.http_ports:
            return self._refuse(method, host, port, "port not allowed")
        fields = header_fields(request.lines)
        if fields is None:
            return self._refuse(method, host, port, MALFORMED_HEADER)
        given = [value for name, value in fields if name == "host"]
        if len(given) > 1:
            return self._refuse(method, host, port, DUPLICATE_HOST)
        if given and header_authority(given[0], 80) != (normal_host(host), port):
            # The upstream (a CDN most of all) routes by this header, not by the address
            # the proxy checked: it must name the host the proxy connects to.
            return self._refuse(method, host, port, f"{HOST_MISMATCH}: {shown(given[0])}")
        lengths = [value for name, value in fields if name == "content-length"]
        if any(name == "transfer-encoding" for name, _ in fields) or len(set(lengths)) > 1:
            return self._refuse(method, host, port, "request body framing")
        if lengths and not re.fullmatch(r"[0-9]{1,15}", lengths[0]):
            return self._refuse(method, host, port, "request body framing")
        path = parts.path or "/"
        if parts.query:
            path += "?" + parts.query
        kept = [
            line
            for line, (name, _) in zip(request.lines, fields, strict=True)
            if not name.startswith("proxy-") and name not in HOP_BY_HOP
        ]
        if not given:
            bracketed = f"[{host}]" if ":" in host else host
            authority = bracketed if parts.port is None else f"{bracketed}:{port}"
            kept.insert(0, f"Host: {authority}".encode())
        kept.append(b"Connection: close")
        head = f"{request.method} {path} {request.version}\r\n".encode()
        head += b"".join(line + b"\r\n" for line in kept) + b"\r\n"
        return _Route(method, host, port, head=head, body=int(lengths[0]) if lengths else 0)

    def _tunnel(
        self, client: socket.socket, upstream: socket.socket, first: bytes, route: _Route
    ) -> None:
        """A CDN routes TLS by the ClientHello's server name, so a tunnel to an allowed
        host must not carry another's: nothing goes upstream before the client's
        hello names the CONNECT host, and a second hello (after the server asks for a
        retry) is held to the same rule. What travels inside TLS afterwards (the HTTP
        Host header, HTTP/2 requests for other names the certificate covers) cannot be
        seen without terminating TLS, which this proxy does not do."""
        client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        hello = self._client_hello(client, first, route)
        if hello is None:
            return
        self._count_allowed()
        upstream.sendall(hello.data[: hello.verdict.end])

        def judge(verdict: HelloVerdict) -> str | None:
            reason = _hello_refusal(verdict, route.host)
            if reason is not None:
                self._log.refuse(BlockedRequest(route.method, route.host, route.port, reason))
            return reason

        gate = _HelloGate(judge)
        _send(upstream, gate.from_client(hello.data[hello.verdict.end :]))
        if _splice(client, upstream, gate) is not None:
            client.sendall(_TLS_ACCESS_DENIED)

    def _client_hello(
        self, client: socket.socket, first: bytes, route: _Route
    ) -> _FirstHello | None:
        """The client's first bytes in a tunnel, once they hold a ClientHello whose
        server name is the CONNECT host; None when the tunnel must close unused (the
        refusal recorded)."""
        data = first
        client.settimeout(HEAD_TIMEOUT_S)
        try:
            verdict = read_client_hello(data)
            while isinstance(verdict, Incomplete):
                chunk = client.recv(4096)
                if not chunk:
                    return None
                data += chunk
                verdict = read_client_hello(data)
        except TimeoutError:
            verdict = BadHello("no client hello in time")
        client.settimeout(None)
        reason = _hello_refusal(verdict, route.host)
        if reason is None and isinstance(verdict, ClientHello):
            return _FirstHello(data, verdict)
        self._log.refuse(BlockedRequest(route.method, route.host, route.port, str(reason)))
        if not (isinstance(verdict, BadHello) and verdict.reason == NOT_TLS):
            client.sendall(_TLS_ACCESS_DENIED)
        return None

    def _connect(self, method: str, host: str, port: int) -> socket.socket | bytes:
        if not self.policy.allows(host):
            return self._refuse(method, host, port, "host not on the allow-list")
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError:
            return self._refuse(method, host, port, "name does not resolve")
        for family, kind, proto, _, address in infos:
            if not self.policy.address_ok(host, str(address[0])):
                return self._refuse(method, host, port, f"resolves to {address[0]}")
            sock = socket.socket(family, kind, proto)
            sock.settimeout(_CONNECT_TIMEOUT_S)
            try:
                sock.connect(address)
            except OSError:
                sock.close()
                continue
            sock.settimeout(None)
            return sock
        return reply(502, f"could not connect to {host}:{port}")

    def _count_allowed(self) -> None:
        with self._log.lock:
            self._log.allowed += 1

    def _refuse(self, method: str, host: str, port: int, reason: str) -> bytes:
        self._log.refuse(BlockedRequest(method=method, host=host, port=port, reason=reason))
        return reply(403, f"Ribbit setup proxy refused {shown(host)}:{port}: {reason}")


@dataclass(frozen=True)
class _FirstHello:
    data: bytes  # what the client has sent so far: the hello, and maybe more after it
    verdict: ClientHello


class _Gate(Protocol):
    """What may pass between the client and the upstream, decided as bytes arrive."""

    refusal: str | None  # set: the connection must close now

    @property
    def open(self) -> bool:
        """Nothing is held back for later: the client's end of stream may go on."""

    def from_client(self, data: bytes) -> bytes:
        """What of the client's ``data`` goes upstream now."""

    def from_server(self, data: bytes) -> bytes:
        """Client bytes held until the upstream's ``data`` arrived, to go upstream now."""

    def to_client(self, data: bytes) -> bytes:
        """What the client gets of the upstream's ``data`` (b"": the upstream ended)."""


class _HelloGate(SecondHello):
    def to_client(self, data: bytes) -> bytes:
        return data


@dataclass(frozen=True)
class _Route:
    """Where a request may go. A tunnel (``body`` None) or one plain-HTTP request:
    ``head`` as sent upstream and the ``body`` bytes the client may send after it."""

    method: str
    host: str
    port: int
    head: bytes = b""
    body: int | None = None


def _hello_refusal(verdict: HelloVerdict, host: str) -> str | None:
    """Why a tunnel to ``host`` must not carry this ClientHello (None: it may)."""
    if isinstance(verdict, BadHello):
        return verdict.reason
    if isinstance(verdict, Incomplete):
        return "no client hello"
    if verdict.encrypted:
        # Its outer name may be the allowed host's while the inner, encrypted one (the
        # one the server routes by) names any other site behind the same front.
        return ENCRYPTED_HELLO
    names = verdict.server_names
    if len(names) > 1:
        return f"{SEVERAL_SNI}: {shown(' '.join(names))}"
    if not names:
        # Clients send no name for an address (RFC 6066), and an address routes itself.
        return None if is_address(host) else NO_SNI
    if normal_host(names[0]) != normal_host(host):
        return f"{SNI_MISMATCH}: {shown(names[0])}"
    return None


def _splice(a: socket.socket, b: socket.socket, gate: _Gate | None = None) -> str | None:
    """Copy both ways until both ends have closed (or nothing moves for the idle
    timeout). With a ``gate``, what ``a`` sends reaches ``b`` only as the gate allows
    (and ``a``'s end of stream only once nothing is held back); returns the gate's
    refusal if it closed the connection."""
    peers = {a: b, b: a}
    open_ends = {a, b}
    a_ended = b_shut = False
    while open_ends:
        try:
            ready, _, _ = select.select(list(open_ends), [], [], _IDLE_TIMEOUT_S)
        except (ValueError, OSError):
            return None  # an end was closed under us (the proxy stopping): nothing to copy
        if not ready:
            return None
        for src in ready:
            data = src.recv(65536)
            if not data:
                open_ends.discard(src)
                if src is a:
                    a_ended = True
                else:
                    with contextlib.suppress(OSError):
                        if gate is not None:
                            _send(a, gate.to_client(b""))
                        a.shutdown(socket.SHUT_WR)
            elif gate is None:
                peers[src].sendall(data)
            elif src is a:
                _send(b, gate.from_client(data))
            else:
                _send(a, gate.to_client(data))
                _send(b, gate.from_server(data))
            if gate is not None and gate.refusal is not None:
                return gate.refusal
            if a_ended and not b_shut and (gate is None or gate.open):
                b_shut = True
                with contextlib.suppress(OSError):
                    b.shutdown(socket.SHUT_WR)
    return None


def _send(sock: socket.socket, data: bytes) -> None:
    # Not even an empty send to an end already shut for writing: that one fails too.
    if data:
        sock.sendall(data)


def egress_env(index_url: str | None, *, ca_bundle: bool = False) -> dict[str, str]:
    """The setup command's proxy settings, in every spelling package managers read;
    with ``ca_bundle``, the deployment's CA bundle (a TLS-inspecting gateway's) too."""
    env = {}
    if ca_bundle:
        ca = f"{EGRESS_MOUNT}/{CA_NAME}"
        for name in (
            "SSL_CERT_FILE",
            "PIP_CERT",
            "REQUESTS_CA_BUNDLE",
            "CURL_CA_BUNDLE",
            "NODE_EXTRA_CA_CERTS",
            "npm_config_cafile",
            "GIT_SSL_CAINFO",
        ):
            env[name] = ca
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        env[name] = PROXY_URL
    env["npm_config_proxy"] = PROXY_URL
    env["npm_config_https_proxy"] = PROXY_URL
    env["NO_PROXY"] = env["no_proxy"] = ""
    if index_url:
        env["PIP_INDEX_URL"] = index_url
    return env


def forwarder_argv(command: list[str]) -> list[str]:
    """``command`` wrapped so it runs with the in-sandbox forwarder listening."""
    return [
        "/usr/bin/python3",
        "-I",
        f"{EGRESS_MOUNT}/{FORWARDER_NAME}",
        f"{EGRESS_MOUNT}/{SOCKET_NAME}",
        *command,
    ]


def make_egress_dir(parent: Path | None = None) -> Path:
    """A fresh host folder for one sandbox's proxy socket (short path: unix sockets
    allow about 100 bytes)."""
    import tempfile

    path = Path(tempfile.mkdtemp(prefix="ribbit-egress-", dir=parent))
    # The sandbox user (another uid) must reach the socket inside; the folder is
    # bound read-only into this one sandbox only.
    path.chmod(0o755)
    return path
