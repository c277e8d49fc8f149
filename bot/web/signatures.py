"""Webhook authenticity checks, both in constant time."""

from __future__ import annotations

import hashlib
import hmac


def sign_github(secret: str, body: bytes) -> str:
    """The X-Hub-Signature-256 value GitHub sends for ``body``."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def verify_github_signature(secret: str, body: bytes, header: str | None) -> bool:
    """HMAC-SHA256 over the raw body, compared with hmac.compare_digest (constant time).
    An empty secret verifies nothing: anyone can sign with it, and an empty variable
    (RIBBIT_GITHUB__WEBHOOK_SECRET=) loads as an empty secret, not as an unset one."""
    if not secret or not header or not header.startswith("sha256="):
        return False
    return hmac.compare_digest(sign_github(secret, body).encode(), header.encode())


def verify_gitlab_token(secret: str, header: str | None) -> bool:
    """GitLab sends the shared token itself; compare digests so length leaks nothing.
    An empty token verifies nothing, as for GitHub."""
    if not secret or not header:
        return False
    return hmac.compare_digest(
        hashlib.sha256(secret.encode()).digest(), hashlib.sha256(header.encode()).digest()
    )
