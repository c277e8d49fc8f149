"""Secrets in an added line: the shapes issuers document for their tokens and keys,
and a high-entropy quoted value assigned to a secret-sounding name. Pure: a line in,
the kinds of secret it appears to hold out (hygiene.py turns them into findings).
"""

from __future__ import annotations

import math
import re
from collections import Counter

# Secret shapes, from the issuers' documented formats.
_SECRET_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("github-token", re.compile(r"\b(gh[pousr]_[A-Za-z0-9]{36,255})\b")),
    ("github-token", re.compile(r"\b(github_pat_[A-Za-z0-9_]{22,255})\b")),
    (
        "gitlab-token",
        re.compile(r"\b(gl(?:pat|dt|rt|ptt|cbt|soat|ffct|imt)-[A-Za-z0-9_\-]{20,255})"),
    ),
    ("aws-access-key", re.compile(r"\b((?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16})\b")),
    (
        "private-key",
        re.compile(
            r"-----BEGIN ((?:RSA|DSA|EC|OPENSSH|PGP|ENCRYPTED) )?PRIVATE KEY"
            r"( BLOCK)?-----"
        ),
    ),
    ("slack-token", re.compile(r"\b(xox[abposr]-[A-Za-z0-9-]{10,255})")),
    (
        "slack-webhook",
        re.compile(r"hooks\.slack\.com/services/T[A-Za-z0-9_]{1,64}/B[A-Za-z0-9_]{1,64}/\w{1,64}"),
    ),
    ("stripe-key", re.compile(r"\b((?:sk|rk)_live_[A-Za-z0-9]{20,255})")),
    ("google-api-key", re.compile(r"\b(AIza[0-9A-Za-z_\-]{35})\b")),
    ("openai-key", re.compile(r"\b(sk-(?:proj-)?[A-Za-z0-9_\-]{32,255})")),
    ("npm-token", re.compile(r"\b(npm_[A-Za-z0-9]{36})\b")),
    ("pypi-token", re.compile(r"\b(pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_\-]{50,1024})")),
)
# An assignment of a quoted value to a secret-sounding name. Matched in two steps with
# bounded quantifiers, so the work is linear in the line's length: a single regex with
# ``[a-z0-9_.-]*`` on both sides of the keyword was quadratic (a 16k-character
# minified line took 38 s).
_SECRET_WORD_RE = re.compile(
    r"(?i)secret|token|passw(?:or)?d|pwd|api[_\-]?key|apikey|access[_\-]?key|private[_\-]?key"
    r"|auth[_\-]?key|credential"
    # The short spellings as a word of their own (DB_PASS, SMTP_PW), not inside others
    # (bypass, passenger).
    r"|(?<![a-z])(?:pass|pw|pswd)(?![a-z])"
)
_SECRET_TAIL_RE = re.compile(
    r"""(?i)[a-z0-9_.\-]{0,64}["']?\s{0,16}(?::|=|:=|=>)\s{0,16}[rbuf]?["']"""
    r"""(?P<value>[^"'\s]{12,512})["']"""
)
_PLACEHOLDER_RE = re.compile(
    r"(?i)(x{4,}|\*{3,}|<[^>]*>|\$\{|\{\{|change[_-]?me|example|dummy"
    r"|placeholder|your[_-]|redacted|fake|test|sample|^\.\.\.)"
)


def _entropy(value: str) -> float:
    counts = Counter(value)
    return -sum(c / len(value) * math.log2(c / len(value)) for c in counts.values())


def find_secrets(line: str) -> list[str]:
    """The kinds of secret ``line`` appears to contain."""
    kinds = [kind for kind, pattern in _SECRET_PATTERNS if pattern.search(line)]
    for word in _SECRET_WORD_RE.finditer(line):
        m = _SECRET_TAIL_RE.match(line, word.end())
        if m is None:
            continue
        value = m["value"]
        if (
            not _PLACEHOLDER_RE.search(value)
            and _entropy(value) >= 3.5
            and not re.fullmatch(r"[a-z_.]+", value)  # an identifier, not a secret
            and not value.startswith(("http://", "https://", "/", "os.", "env"))
        ):
            kinds.append("high-entropy-secret")
    return sorted(set(kinds))
