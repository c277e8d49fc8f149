"""Webhook authenticity as an attacker meets it: GitHub's HMAC over the raw body and
GitLab's shared token, each refused when wrong, missing, garbled or merely close, and
compared in constant time. The HTTP answers (401, no job) are in test_webhooks.py."""

from __future__ import annotations

import hmac

import pytest

from bot.web import signatures
from bot.web.signatures import sign_github, verify_github_signature, verify_gitlab_token

# GitHub's documented test vector ("Validating webhook deliveries"), so the signature is
# checked against GitHub's own arithmetic rather than against this module's.
DOC_SECRET = "It's a Secret to Everybody"
DOC_BODY = b"Hello, World!"
DOC_SIGNATURE = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"

SECRET = "gh-secret"
BODY = b'{"action": "labeled", "label": {"name": "ribbit"}}'


def test_sign_github_matches_githubs_documented_vector() -> None:
    assert sign_github(DOC_SECRET, DOC_BODY) == DOC_SIGNATURE
    assert verify_github_signature(DOC_SECRET, DOC_BODY, DOC_SIGNATURE)


def test_github_signature_of_the_same_body_and_secret_verifies() -> None:
    assert verify_github_signature(SECRET, BODY, sign_github(SECRET, BODY))


def test_github_signature_over_a_huge_body_verifies_and_one_flipped_byte_does_not() -> None:
    body = b"x" * (8 * 1024 * 1024)
    header = sign_github(SECRET, body)
    assert verify_github_signature(SECRET, body, header)
    assert not verify_github_signature(SECRET, body[:-1] + b"y", header)


@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        "sha256=",
        "sha256",
        "sha1=" + "0" * 40,
        # The right digest, but not in the form GitHub sends it.
        sign_github(SECRET, BODY).upper(),
        "SHA256=" + sign_github(SECRET, BODY).removeprefix("sha256="),
        sign_github(SECRET, BODY).removeprefix("sha256="),
        " " + sign_github(SECRET, BODY),
        sign_github(SECRET, BODY) + "\n",
        sign_github(SECRET, BODY) + "00",
        # A prefix of the right signature: a compare that stopped at the shorter one
        # would accept it.
        sign_github(SECRET, BODY)[:-1],
        "sha256=" + "0" * 64,
    ],
)
def test_github_missing_or_garbled_signature_is_refused(header: str | None) -> None:
    assert not verify_github_signature(SECRET, BODY, header)


def test_github_signature_made_with_another_secret_is_refused() -> None:
    assert not verify_github_signature(SECRET, BODY, sign_github("guessed", BODY))


def test_github_signature_of_another_body_is_refused() -> None:
    other = BODY.replace(b"ribbit", b"ribbot")
    assert not verify_github_signature(SECRET, other, sign_github(SECRET, BODY))


def test_github_signature_with_non_ascii_characters_is_refused_without_an_error() -> None:
    # Headers arrive as latin-1 text; hmac.compare_digest raises TypeError on non-ASCII
    # str, so the comparison must be over bytes (an exception here would be a 500).
    assert not verify_github_signature(SECRET, BODY, "sha256=" + "\u00e9" * 64)


def test_gitlab_exact_token_is_accepted() -> None:
    assert verify_gitlab_token("gl-token", "gl-token")


@pytest.mark.parametrize(
    "header",
    [
        None,
        "",
        "gl-toke",
        "gl-token ",
        "gl-token\n",
        "gl-tokenX",
        "GL-TOKEN",
        "x" * 100_000,
        "gl-t\u00f6ken",
    ],
)
def test_gitlab_missing_or_near_token_is_refused(header: str | None) -> None:
    assert not verify_gitlab_token("gl-token", header)


def test_gitlab_compare_is_constant_time_over_equal_length_digests(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Both sides hashed first: compare_digest's time then depends on neither the token's
    # length nor how much of it an attacker guessed.
    seen: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        seen.append((a, b))
        return real(a, b)

    monkeypatch.setattr(signatures.hmac, "compare_digest", spy)
    assert not verify_gitlab_token("gl-token", "g")
    assert not verify_gitlab_token("gl-token", "gl-token-but-much-longer")
    assert [(len(a), len(b)) for a, b in seen] == [(32, 32), (32, 32)]


def test_github_compare_goes_through_compare_digest(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        calls.append(1)
        return real(a, b)

    monkeypatch.setattr(signatures.hmac, "compare_digest", spy)
    assert verify_github_signature(SECRET, BODY, sign_github(SECRET, BODY))
    assert not verify_github_signature(SECRET, BODY, "sha256=" + "0" * 64)
    assert len(calls) == 2


def test_an_empty_github_secret_accepts_no_signature() -> None:
    # RIBBIT_GITHUB__WEBHOOK_SECRET= (a compose file's ${VAR} left unset) loads as an empty
    # secret, not as none: anyone can compute the HMAC under the empty key.
    assert not verify_github_signature("", BODY, sign_github("", BODY))


@pytest.mark.parametrize("header", ["", None, "x"])
def test_an_empty_gitlab_token_accepts_no_header(header: str | None) -> None:
    assert not verify_gitlab_token("", header)
