"""What the setup proxy (worker/sandbox/egress.py) lets through: which hosts the setup
step may reach and to which addresses they may resolve (:class:`EgressPolicy`), which
hosts a repository may add to that list (:func:`repo_setup_hosts`), and the record of
a refused request (:class:`BlockedRequest`). Pure: no sockets.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit


@dataclass(frozen=True)
class BlockedRequest:
    """A request the setup proxy refused; listed in the job's report."""

    method: str
    host: str
    port: int
    reason: str

    def describe(self) -> str:
        return f"{self.method} {self.host}:{self.port} ({self.reason})"


# Every kind of refusal the proxy records, as the reason's fixed first words (the rest of
# a reason names a host or an address: the client's text, not a metric label).
REFUSAL_KINDS = (
    "host not on the allow-list",
    "not among the hosts this deployment lets repositories add",
    "name does not resolve",
    "resolves to",
    "not a proxy request",
    "port not allowed",
    "only port 443 is tunnelled",
    "request body framing",
    "userinfo in url",
    "malformed header",
    "duplicate host header",
    "second request on one connection",
    "encrypted client hello",
    "no sni",
    "host header mismatch",
    "sni mismatch",
    "several sni names",
    "not tls",
    "client hello too large",
    "bad client hello",
    "no client hello",
    "server hello unreadable",
)


def refusal_kind(reason: str) -> str:
    """The kind of a recorded refusal (one of REFUSAL_KINDS, or "other")."""
    return next((kind for kind in REFUSAL_KINDS if reason.startswith(kind)), "other")


@dataclass(frozen=True)
class EgressPolicy:
    """Which hosts the setup step may reach. ``trusted`` hosts (the deployment's own
    package index) may resolve to internal addresses; the others must not, so a
    poisoned or odd DNS answer cannot point the proxy at the worker's own network
    (Redis, the bot, a cloud metadata service)."""

    hosts: tuple[str, ...]
    trusted: tuple[str, ...] = ()
    http_ports: tuple[int, ...] = (80,)

    @classmethod
    def build(cls, hosts: Iterable[str], index_urls: Iterable[str | None] = ()) -> EgressPolicy:
        trusted: list[str] = []
        ports = {80}
        for url in index_urls:
            if not url:
                continue
            parts = urlsplit(url)
            if parts.hostname:
                trusted.append(parts.hostname.lower())
                if parts.port:
                    ports.add(parts.port)
        names = tuple(dict.fromkeys(h.strip().lower().rstrip(".") for h in hosts if h.strip()))
        return cls(hosts=names + tuple(trusted), trusted=tuple(trusted), http_ports=tuple(ports))

    def allows(self, host: str) -> bool:
        host = host.lower().rstrip(".")
        for entry in self.hosts:
            if entry.startswith("*."):
                if host.endswith(entry[1:]) and len(host) > len(entry) - 1:
                    return True
            elif host == entry:
                return True
        return False

    def address_ok(self, host: str, address: str) -> bool:
        if host.lower().rstrip(".") in self.trusted:
            return True
        return not internal_address(address)


@dataclass(frozen=True)
class RepoHosts:
    """The setup hosts a repository asked for (``.ribbit.yml`` ``setup_hosts``), split by
    the deployment's rule; the refused ones are reported like the proxy's refusals."""

    allowed: tuple[str, ...] = ()
    refused: tuple[BlockedRequest, ...] = ()


REPO_HOST_REFUSED = "not among the hosts this deployment lets repositories add"


def repo_setup_hosts(requested: Iterable[str], permitted: Iterable[str]) -> RepoHosts:
    """``requested`` within ``permitted`` (``SandboxSettings.repo_setup_hosts``): a
    repository may narrow a wildcard the deployment permits (``pkgs.example.org`` under
    ``*.example.org``), never widen one."""
    rules = [p.strip().lower().rstrip(".") for p in permitted if p.strip()]
    allowed: list[str] = []
    refused: list[BlockedRequest] = []
    for raw in requested:
        host = raw.strip().lower().rstrip(".")
        if not host:
            continue
        if _host_permitted(host, rules):
            if host not in allowed:
                allowed.append(host)
        else:
            item = BlockedRequest("setup_hosts", host[:200], 443, REPO_HOST_REFUSED)
            if item not in refused:
                refused.append(item)
    return RepoHosts(tuple(allowed), tuple(refused))


_HOST_NAME = re.compile(r"(\*\.)?[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?")


def _host_permitted(host: str, rules: list[str]) -> bool:
    if not _HOST_NAME.fullmatch(host):
        return False
    for entry in rules:
        if host == entry:
            return True
        if entry.startswith("*."):
            suffix = entry[1:]
            bare = host[2:] if host.startswith("*.") else host
            if bare.endswith(suffix) and len(bare) > len(suffix):
                return True
    return False


# Where a registry name must never lead: the worker itself, its local network and the
# cloud metadata service. (Not "is_global": some controlled networks answer registry
# names with documentation-range addresses of their own gateway.)
_INTERNAL_NETS = tuple(
    ipaddress.ip_network(net)
    for net in (
        "0.0.0.0/8",
        "10.0.0.0/8",
        "100.64.0.0/10",
        "127.0.0.0/8",
        "169.254.0.0/16",
        "172.16.0.0/12",
        "192.168.0.0/16",
        "224.0.0.0/4",
        "240.0.0.0/4",
        "::/128",
        "::1/128",
        "fc00::/7",
        "fe80::/10",
        "ff00::/8",
    )
)


def internal_address(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return any(ip in net for net in _INTERNAL_NETS)
