"""The ClientHello parser on real hellos (made by Python's own TLS stack through memory
BIOs, no network) and on the variants a client could send to slip a name past it:
fragmented records, several names, no name, duplicate or encrypted extensions,
truncated, oversized and non-TLS input."""

from __future__ import annotations

import ssl
from collections.abc import Callable

import pytest

from worker.sandbox.tlshello import (
    HELLO_RETRY_RANDOM,
    NOT_TLS,
    TOO_LARGE,
    BadHello,
    ClientHello,
    HelloVerdict,
    Incomplete,
    SecondHello,
    read_client_hello,
)

Extensions = list[tuple[int, bytes]]


def real_hello(server_hostname: str | None) -> bytes:
    """The first flight of a real TLS client: one record holding its ClientHello."""
    context = ssl.create_default_context()
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    client = context.wrap_bio(incoming, outgoing, server_hostname=server_hostname)
    with pytest.raises(ssl.SSLWantReadError):
        client.do_handshake()
    return outgoing.read()


def split_hello(hello: bytes) -> tuple[bytes, Extensions]:
    """A one-record hello as (body before the extensions, the extensions)."""
    assert hello[0] == 0x16 and int.from_bytes(hello[3:5], "big") == len(hello) - 5
    body = hello[9:]
    at = 2 + 32
    at += 1 + body[at]  # session id
    at += 2 + int.from_bytes(body[at : at + 2], "big")  # cipher suites
    at += 1 + body[at]  # compression methods
    head, block = body[:at], body[at + 2 :]
    extensions: Extensions = []
    while block:
        kind, size = int.from_bytes(block[:2], "big"), int.from_bytes(block[2:4], "big")
        extensions.append((kind, block[4 : 4 + size]))
        block = block[4 + size :]
    return head, extensions


def message(head: bytes, extensions: Extensions | None) -> bytes:
    body = head
    if extensions is not None:
        block = b"".join(
            kind.to_bytes(2, "big") + len(data).to_bytes(2, "big") + data
            for kind, data in extensions
        )
        body += len(block).to_bytes(2, "big") + block
    return b"\x01" + len(body).to_bytes(3, "big") + body


def records(msg: bytes, size: int = 2**14, kind: int = 0x16) -> bytes:
    """``msg`` in TLS records of at most ``size`` bytes each."""
    chunks = [msg[i : i + size] for i in range(0, len(msg), size)]
    return b"".join(bytes([kind, 3, 1]) + len(c).to_bytes(2, "big") + c for c in chunks)


def edited(server_hostname: str, edit: Callable[[Extensions], Extensions]) -> bytes:
    head, extensions = split_hello(real_hello(server_hostname))
    return records(message(head, edit(extensions)))


def sni(*names: bytes, kind: int = 0) -> bytes:
    entries = b"".join(bytes([kind]) + len(n).to_bytes(2, "big") + n for n in names)
    return len(entries).to_bytes(2, "big") + entries


def with_sni(data: bytes) -> Callable[[Extensions], Extensions]:
    return lambda exts: [(k, data if k == 0 else d) for k, d in exts]


def _adding(kind: int, data: bytes) -> Callable[[Extensions], Extensions]:
    return lambda exts: [*exts, (kind, data)]


def test_a_real_hello_gives_its_server_name() -> None:
    assert read_client_hello(real_hello("pypi.org")) == ClientHello(("pypi.org",))
    # The rebuilding helpers keep a hello readable by themselves.
    assert read_client_hello(edited("pypi.org", lambda exts: exts)) == ClientHello(("pypi.org",))


def test_a_hello_to_an_address_has_no_server_name() -> None:
    # Clients send no SNI for an IP literal (RFC 6066); the proxy decides what that means.
    assert read_client_hello(real_hello("127.0.0.1")) == ClientHello(())


def test_every_prefix_of_a_hello_waits_for_more() -> None:
    hello = real_hello("files.pythonhosted.org")
    for end in range(len(hello)):
        assert read_client_hello(hello[:end]) == Incomplete(), end
    assert read_client_hello(hello) == ClientHello(("files.pythonhosted.org",))


def test_a_hello_fragmented_over_many_records_is_reassembled() -> None:
    head, extensions = split_hello(real_hello("registry.npmjs.org"))
    fragmented = records(message(head, extensions), size=7)
    for end in range(len(fragmented)):
        assert read_client_hello(fragmented[:end]) == Incomplete(), end
    assert read_client_hello(fragmented) == ClientHello(("registry.npmjs.org",))


def test_records_after_a_complete_hello_are_the_clients_business() -> None:
    change_cipher_spec = b"\x14\x03\x03\x00\x01\x01"
    hello = real_hello("pypi.org")
    verdict = read_client_hello(hello + change_cipher_spec)
    assert verdict == ClientHello(("pypi.org",))
    assert isinstance(verdict, ClientHello) and verdict.end == len(hello)


def test_a_hello_without_the_server_name_extension_has_no_name() -> None:
    no_sni = edited("pypi.org", lambda exts: [(k, d) for k, d in exts if k != 0])
    assert read_client_hello(no_sni) == ClientHello(())
    head, _ = split_hello(real_hello("pypi.org"))
    assert read_client_hello(records(message(head, None))) == ClientHello(())


def test_several_names_are_all_reported() -> None:
    two = edited("pypi.org", with_sni(sni(b"pypi.org", b"example.com")))
    assert read_client_hello(two) == ClientHello(("pypi.org", "example.com"))


def test_an_encrypted_client_hello_is_flagged() -> None:
    for kind in (0xFE0D, 0xFFCE):
        ech = edited("pypi.org", _adding(kind, b"\x00" * 40))
        assert read_client_hello(ech) == ClientHello(("pypi.org",), encrypted=True)


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (lambda exts: [*exts, (0, sni(b"example.com"))], "duplicate extension"),
        (with_sni(sni(b"pypi.org", kind=1)), "server name of an unknown type"),
        (with_sni(sni(b"")), "empty server name"),
        (with_sni(sni()), "server name list"),
        (with_sni(b""), "truncated"),
        (with_sni(sni(b"pypi.org") + b"\x00"), "server name list"),
        (with_sni(sni("pypí.org".encode())), "server name is not ascii"),
        (with_sni(b"\x00\x0b\x00\x00\x08pypi"), "truncated"),
    ],
)
def test_a_malformed_server_name_is_refused(
    edit: Callable[[Extensions], Extensions], reason: str
) -> None:
    assert read_client_hello(edited("pypi.org", edit)) == BadHello(f"bad client hello: {reason}")


def test_what_is_not_a_tls_client_hello_is_refused() -> None:
    assert read_client_hello(b"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n") == BadHello(NOT_TLS)
    assert read_client_hello(b"\x80\x2e\x01\x00\x02") == BadHello(NOT_TLS)  # SSLv2 hello
    hello = real_hello("pypi.org")
    head, extensions = split_hello(hello)
    cases = {
        "record version": b"\x16\x09" + hello[2:],
        "record length": b"\x16\x03\x01\x00\x00" + hello[5:],
        "another record inside the client hello": records(message(head, extensions)[:50])
        + b"\x17\x03\x03\x00\x01\x00",
        "first handshake message is not a client hello": records(b"\x02" + hello[6:]),
        "data after the client hello": records(message(head, extensions) + b"\x01\x00\x00\x00"),
        "truncated": records(message(head[:20], None)),
        "data after the extensions": records(_with_length(message(head, extensions) + b"\x00")),
    }
    for reason, data in cases.items():
        assert read_client_hello(data) == BadHello(f"bad client hello: {reason}"), reason
    too_long = b"\x16\x03\x01\x40\x01" + b"\x01" + b"\x00" * 0x4000
    assert read_client_hello(too_long) == BadHello("bad client hello: record length")


def _with_length(msg: bytes) -> bytes:
    """``msg`` with its handshake length recomputed (after bytes were appended)."""
    return msg[:1] + (len(msg) - 4).to_bytes(3, "big") + msg[4:]


def test_an_oversized_hello_is_refused_without_waiting_for_it() -> None:
    # The handshake header alone says the message is too long.
    assert read_client_hello(b"\x16\x03\x01\x00\x04\x01\xff\xff\xff") == BadHello(TOO_LARGE)
    hello = real_hello("pypi.org")
    assert read_client_hello(hello, limit=len(hello) - 10) == BadHello(TOO_LARGE)
    # Bytes that never finish a hello stop being read at the limit.
    endless = records(b"\x01\x00\x03\x00" + b"\x00" * 0x0400, size=1)
    assert read_client_hello(endless[:2000], limit=2000) == BadHello(TOO_LARGE)
    assert read_client_hello(endless[:1999], limit=2000) == Incomplete()


# -- after the first hello: a HelloRetryRequest's second hello --------------------------

_CCS = b"\x14\x03\x03\x00\x01\x01"


def _server_first(random: bytes) -> bytes:
    return b"\x16\x03\x03\x00\x26\x02\x00\x00\x22\x03\x03" + random


def _judge(verdict: HelloVerdict) -> str | None:
    if isinstance(verdict, ClientHello) and verdict.server_names == ("pypi.org",):
        return None
    return "refused"


def test_without_a_retry_request_the_held_bytes_go_on_unread() -> None:
    gate = SecondHello(_judge)
    assert gate.from_client(b"\x17\x03\x03\x00\x01\x00") == b""  # early data waits
    assert gate.from_server(_server_first(b"\x01" * 32)) == b"\x17\x03\x03\x00\x01\x00"
    assert gate.open and gate.refusal is None
    assert gate.from_client(b"anything") == b"anything"


def test_a_second_hello_is_judged_however_it_arrives() -> None:
    good, bad = real_hello("pypi.org"), real_hello("example.com")
    server = _server_first(HELLO_RETRY_RANDOM) + b"\x00" * 20
    for second, refusal in ((good, None), (bad, "refused")):
        # Sent early, byte by byte, and the server's answer too.
        gate = SecondHello(_judge)
        for i in range(len(_CCS + second)):
            assert gate.from_client((_CCS + second)[i : i + 1]) == b""
        released = b"".join(gate.from_server(server[i : i + 1]) for i in range(len(server)))
        assert gate.refusal == refusal
        assert released == (b"" if refusal else _CCS + second)
        # Sent after the server asked, in pieces, with no ChangeCipherSpec first.
        gate = SecondHello(_judge)
        assert gate.from_server(server) == b""
        assert gate.from_client(second[:50]) == b""
        assert gate.from_client(second[50:]) == (b"" if refusal else second)
        assert gate.refusal == refusal


def test_after_a_retry_request_anything_but_a_hello_is_refused() -> None:
    gate = SecondHello(lambda verdict: None if isinstance(verdict, ClientHello) else "no")
    gate.from_server(_server_first(HELLO_RETRY_RANDOM))
    assert gate.from_client(_CCS + b"\x17\x03\x03\x00\x01\x00") == b""
    assert gate.refusal == "no" and not gate.open


def test_a_server_that_is_not_tls_or_sends_an_alert_asks_for_nothing() -> None:
    for first in (b"\x15\x03\x03\x00\x02\x02\x28", b"HTTP/1.1 400 Bad Request\r\n\r\n"):
        gate = SecondHello(_judge)
        assert gate.from_client(b"held") == b""
        assert gate.from_server(first) == b"held"
        assert gate.open


def test_the_gate_holds_a_bounded_amount() -> None:
    gate = SecondHello(_judge, limit=100)
    assert gate.from_client(b"x" * 100) == b""
    assert gate.refusal is None
    assert gate.from_client(b"x") == b""
    assert gate.refusal == TOO_LARGE
    assert gate.from_server(_server_first(b"\x01" * 32)) == b""
