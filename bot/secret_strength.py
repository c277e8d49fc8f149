"""Whether a value may serve as a shared secret: the strength check every secret the
operator picks (the admin tokens, the webhook secrets, the reviewer link key) passes
when settings are built (bot/settings.py's validators call :func:`require_strong_secret`).
"""

from __future__ import annotations

import itertools
import unicodedata

from pydantic import SecretStr

# Shared secrets are the ones Ribbit's operator picks (the admin tokens, the webhook
# secrets, the reviewer link key); tokens a forge or a service issues are not ours to judge.
# 32 characters: `secrets.token_urlsafe(32)` gives 43 (256 bits) and `openssl rand -hex 32`
# 64, while 32 hex characters, the least random form a generator gives, still carry 128
# bits, out of reach of the offline guessing an HMAC key or a bearer token faces. A value a
# person typed seldom reaches 32 characters; one that does is caught below as a pattern.
MIN_SECRET_CHARS = 32
HOW_TO_GENERATE = 'python -c "import secrets; print(secrets.token_urlsafe(32))"'
# Words of placeholders and of secrets a person made up, found in the value with case and
# punctuation ignored (CHANGE-ME, change_me, ChangeMe...). Each has 6 characters or more,
# so a generated secret holds one by chance with a probability under 1e-7.
PLACEHOLDER_WORDS = (
    "changeme",
    "replaceme",
    "placeholder",
    "example",
    "password",
    "passwd",
    "secret",
    "insecure",
    "default",
    "letmein",
    "qwerty",
    "yourtoken",
)
# A random value of 32 characters or more uses far more distinct characters than this
# (32 hex characters: fewer than 9 in under 1e-5 of draws); xxxx..., abab... use fewer.
_MIN_DISTINCT_CHARS = 8


def secret_weakness(value: str) -> str | None:
    """Why ``value`` cannot serve as a shared secret (a placeholder, too short, a
    pattern), or None when it may."""
    # NFKC first, so fullwidth or styled letters read as the plain ones they look like.
    folded = "".join(c for c in unicodedata.normalize("NFKC", value).casefold() if c.isalnum())
    for word in PLACEHOLDER_WORDS:
        if word in folded:
            return f"looks like a placeholder or a made-up value (it contains {word!r})"
    if len(value) < MIN_SECRET_CHARS:
        return f"is {len(value)} characters long; it needs at least {MIN_SECRET_CHARS}"
    if len(set(value)) < _MIN_DISTINCT_CHARS or _repeats(value) or _mostly_sequential(value):
        return "is a pattern (repeated or sequential characters), not a random value"
    return None


def _repeats(value: str) -> bool:
    """Whether ``value`` is a shorter piece over and over (abcdabcd..., xyzxyzx...): its
    shortest period, the length less its longest proper border (KMP), is at most half."""
    border = [0] * len(value)
    for i in range(1, len(value)):
        k = border[i - 1]
        while k and value[i] != value[k]:
            k = border[k - 1]
        border[i] = k + (value[i] == value[k])
    return bool(value) and (len(value) - border[-1]) * 2 <= len(value)


def _mostly_sequential(value: str) -> bool:
    """Whether nearly all neighbours are the same or next characters (0123..., abcd...,
    aabbcc...); in a random value a few are, by chance (in 32 hex characters, 6 of 31)."""
    steps = [abs(ord(b) - ord(a)) <= 1 for a, b in itertools.pairwise(value)]
    return sum(steps) * 4 > len(steps) * 3


def require_strong_secret(value: SecretStr | None, variable: str) -> SecretStr | None:
    """``value`` if it may serve as a shared secret (or is unset); else a ValueError naming
    ``variable`` and how to generate a good one."""
    if value is None:
        return None
    weakness = secret_weakness(value.get_secret_value())
    if weakness is not None:
        raise ValueError(f"{variable} {weakness}; generate one with: {HOW_TO_GENERATE}")
    return value
