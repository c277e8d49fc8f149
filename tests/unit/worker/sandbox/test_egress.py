"""The setup proxy on its own, over a real unix socket: what it lets through, what it
refuses, and that every refusal is recorded. No internet: the allowed upstream is a
local HTTP server named as the deployment's package index."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.support import local_http
from worker.sandbox.egress import FORWARDER_NAME, EgressProxy, egress_env
from worker.sandbox.egress_policy import EgressPolicy, internal_address


class _Hello(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = f"hello {self.path}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def upstream() -> Iterator[int]:
    with local_http(_Hello, server_class=HTTPServer) as url:
        port = urlsplit(url).port
        assert port is not None
        yield port


def _ask(proxy: EgressProxy, request: bytes) -> bytes:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(30)
        s.connect(str(proxy.socket_path))
        s.sendall(request)
        chunks = []
        while chunk := s.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_policy_matches_exact_hosts_and_subdomain_wildcards() -> None:
    policy = EgressPolicy.build(["pypi.org", "*.example.org"])
    assert policy.allows("pypi.org")
    assert policy.allows("PyPI.org.")
    assert policy.allows("a.example.org")
    assert not policy.allows("example.org")
    assert not policy.allows("pypi.org.evil.com")
    assert not policy.allows("evilpypi.org")
    assert not policy.allows("xexample.org")


def test_internal_addresses_are_refused_for_registry_names() -> None:
    policy = EgressPolicy.build(["pypi.org"], ["http://mirror.internal:3141/simple"])
    for address in ("127.0.0.1", "10.1.2.3", "169.254.169.254", "::1", "::ffff:127.0.0.1"):
        assert internal_address(address)
        assert not policy.address_ok("pypi.org", address)
    assert policy.address_ok("pypi.org", "151.101.0.223")
    # The deployment's own index may live on its private network.
    assert policy.address_ok("mirror.internal", "10.1.2.3")
    assert 3141 in policy.http_ports


def test_proxy_forwards_to_the_index_and_refuses_and_records_the_rest(
    tmp_path: Path, upstream: int
) -> None:
    policy = EgressPolicy.build(["pypi.org"], [f"http://127.0.0.1:{upstream}/simple/"])
    with EgressProxy(tmp_path, policy) as proxy:
        assert (tmp_path / FORWARDER_NAME).exists()
        ok = _ask(
            proxy,
            f"GET http://127.0.0.1:{upstream}/simple/x HTTP/1.0\r\n"
            "Proxy-Authorization: secret\r\n\r\n".encode(),
        )
        assert ok.startswith(b"HTTP/1.0 200") and ok.endswith(b"hello /simple/x")
        refused = _ask(proxy, b"CONNECT github.com:443 HTTP/1.1\r\nHost: github.com\r\n\r\n")
        assert refused.startswith(b"HTTP/1.1 403")
        wrong_port = _ask(proxy, b"CONNECT pypi.org:22 HTTP/1.1\r\n\r\n")
        assert wrong_port.startswith(b"HTTP/1.1 403")
        # The index's port is open only for the index host, not for any other name.
        other = _ask(proxy, f"GET http://localhost:{upstream}/ HTTP/1.0\r\n\r\n".encode())
        assert other.startswith(b"HTTP/1.1 403")
        blocked = [(b.method, b.host, b.port) for b in proxy.blocked]
        assert proxy.allowed_count == 1
    assert blocked == [
        ("CONNECT", "github.com", 443),
        ("CONNECT", "pypi.org", 22),
        ("GET", "localhost", upstream),
    ]
    assert not proxy.socket_path.exists()


def test_proxy_refuses_a_registry_name_that_resolves_inside(tmp_path: Path) -> None:
    # "localhost" on the allow-list stands for a registry name a poisoned DNS points home.
    with EgressProxy(tmp_path, EgressPolicy.build(["localhost"])) as proxy:
        reply = _ask(proxy, b"CONNECT localhost:443 HTTP/1.1\r\n\r\n")
    assert reply.startswith(b"HTTP/1.1 403")
    assert "resolves to" in proxy.blocked[0].reason


def test_egress_env_sets_every_proxy_spelling_and_the_index() -> None:
    env = egress_env("https://mirror.example/simple", ca_bundle=True)
    assert env["HTTPS_PROXY"] == env["https_proxy"] == env["npm_config_https_proxy"]
    assert env["PIP_INDEX_URL"] == "https://mirror.example/simple"
    assert env["PIP_CERT"].endswith("/ca.pem")


def test_proxy_caps_the_connections_a_sandbox_can_hold_open(tmp_path: Path) -> None:
    from worker.sandbox import egress

    with EgressProxy(tmp_path, EgressPolicy.build([])) as proxy:
        held = []
        for _ in range(egress._MAX_SOCKETS + 5):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(str(proxy.socket_path))
            held.append(s)
        # The connections past the cap are closed at once; the others wait for a head.
        last = held[-1]
        last.settimeout(30)
        assert last.recv(1) == b""
        first = held[0]
        first.sendall(b"CONNECT example.com:443 HTTP/1.1\r\n\r\n")
        first.settimeout(30)
        assert first.recv(12) == b"HTTP/1.1 403"
        for s in held:
            s.close()
