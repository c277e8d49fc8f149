"""Finding copies of the deployment's set-up credentials in what a setup step left.

The registry credentials (``RIBBIT_SANDBOX__SETUP_CREDENTIALS_DIR``: ``.npmrc``,
``pip.conf``, ``.netrc``) are shown to the setup command alone, but that command (or
any install script of any dependency) can copy them anywhere it may write. So every
snapshot of a set-up environment is searched for their secret values before anything
else sees it (worker/sandbox/envcache.py refuses it on a hit): the values as written,
and as the usual encodings carry them (base64 standard and URL-safe, at each of the 3
alignments a value can have inside a longer encoded text, so padding never matters;
hex; URL-encoding; and the ``user:password`` pair in base64, npm's ``_auth`` form and
HTTP basic auth's).

One pass over the bytes: every encoded form is a needle of one compiled alternation,
and files are streamed in bounded chunks. A hit names the file and the credential file
it came from, never the value.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import logging
import os
import re
import stat
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote_from_bytes, quote_plus, unquote

log = logging.getLogger(__name__)

# A shorter value would match by chance somewhere in a multi-gigabyte environment; such
# a value is not searched for (and a warning says so).
MIN_SECRET_BYTES = 8
_CHUNK = 1024 * 1024
# Keys whose value is a secret in .npmrc / pip.conf lines (``//host/:_authToken=``).
_SECRET_KEY = re.compile(r"(auth|token|passw|secret|apikey|api_key)", re.IGNORECASE)
_USER_KEY = re.compile(r"(user(name)?|login)$", re.IGNORECASE)
# user:password@ or token@ in a URL (pip.conf's index-url, an .npmrc registry).
_URL_USERINFO = re.compile(r"[a-z][a-z0-9+.-]*://([^/@\s]+)@", re.IGNORECASE)
# Not secrets, though under a secret's key or on an unrecognised line: a variable the
# package manager expands (``${NPM_TOKEN}``, written in many packages' READMEs), a flag,
# a URL or host name without credentials (pip's own code holds pypi.org's).
_NOT_SECRET = re.compile(
    r"^(\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|true|false|[a-z][a-z0-9+.-]*://[^@]*|[\w.-]+\.[a-z]{2,})$",
    re.IGNORECASE,
)


class SecretInSnapshot(Exception):
    """A snapshot holds a copy of a set-up credential. The message names the file and
    the credential file, never the value."""


@dataclass(frozen=True)
class SecretScanner:
    """The compiled needles of one credential set; ``pattern`` is None when there is
    nothing to look for."""

    pattern: re.Pattern[bytes] | None
    longest: int
    owners: Mapping[bytes, str]  # needle -> the credential file it came from

    @classmethod
    def from_credentials(cls, files: Mapping[str, bytes]) -> SecretScanner:
        owners: dict[bytes, str] = {}
        for name, data in sorted(files.items()):
            for value in secret_values(data):
                if len(value) < MIN_SECRET_BYTES:
                    log.warning(
                        "a value in the %s credential is under %d bytes: not searched for",
                        name,
                        MIN_SECRET_BYTES,
                    )
                    continue
                for needle in encoded_forms(value):
                    owners.setdefault(needle, name)
        if not owners:
            return cls(None, 0, {})
        # Longest first, so the alternation reports the fullest form that matched.
        ordered = sorted(owners, key=lambda n: (-len(n), n))
        pattern = re.compile(b"|".join(re.escape(n) for n in ordered))
        return cls(pattern, len(ordered[0]), owners)

    def search(self, data: bytes) -> str | None:
        """The credential file whose value ``data`` holds, or None."""
        if self.pattern is None:
            return None
        hit = self.pattern.search(data)
        return None if hit is None else self.owners[hit.group(0)]

    def redact(self, text: str) -> str:
        """``text`` (a command's output, for the job record) with every credential form
        replaced."""
        if self.pattern is None:
            return text
        raw = text.encode("utf-8", errors="surrogateescape")
        return self.pattern.sub(b"[credential withheld]", raw).decode(
            "utf-8", errors="surrogateescape"
        )

    def withhold(self, name: str) -> str:
        """``name`` (a host name the setup asked for, shown in the job's report), or a
        placeholder when it holds a credential in any letter case (DNS ignores case,
        so a value can be smuggled in a host name lowercased)."""
        if self.pattern is None:
            return name
        folded = re.compile(self.pattern.pattern, re.IGNORECASE)
        return "[credential withheld]" if folded.search(name.encode()) else name

    def check_tree(self, root: Path, shown_as: str) -> None:
        """Raise :class:`SecretInSnapshot` when any file of ``root`` (contents, name or
        link target) holds a credential; ``shown_as`` is the folder's path as the
        sandbox sees it, for the message. Links are never followed; files that are not
        regular are skipped (an export holds none)."""
        if self.pattern is None or not root.exists():
            return
        for path in _walk(root):
            rel = path.relative_to(root).as_posix()
            where = f"{shown_as.rstrip('/')}/{rel}"
            owner = self.search(os.fsencode(rel))
            if owner is None and path.is_symlink():
                owner = self.search(os.fsencode(os.readlink(path)))
            elif owner is None:
                owner = self._search_file(path)
            if owner is not None:
                raise SecretInSnapshot(
                    f"{self.redact(where)} holds a copy of the deployment's set-up credential "
                    f"`{owner}` (the value is not shown)"
                )

    def _search_file(self, path: Path) -> str | None:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None
            # A needle split across two chunks is found in the carried-over tail.
            carry = b""
            while chunk := os.read(fd, _CHUNK):
                window = carry + chunk
                owner = self.search(window)
                if owner is not None:
                    return owner
                carry = window[-(self.longest - 1) :] if self.longest > 1 else b""
            return None
        finally:
            os.close(fd)


def credential_digest(files: Mapping[str, bytes]) -> str | None:
    """What the environment cache's key records of a credential set: which files, and
    a digest of their contents; never the contents. None for no credentials."""
    if not files:
        return None
    h = hashlib.sha256(b"ribbit setup credentials v1\0")
    for name, data in sorted(files.items()):
        h.update(f"{name}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()


def secret_values(data: bytes) -> list[bytes]:
    """The secret values of a credential file (.npmrc / pip.conf ``key = value`` lines,
    .netrc tokens, URLs with a password or token), with the ``user:password`` pairs they
    imply. A file from which nothing is recognised counts every line's value as secret,
    less what is plainly none (``_NOT_SECRET``)."""
    text = data.decode("utf-8", errors="replace")
    values: list[str] = []
    users: list[str] = []
    passwords: list[str] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        for userinfo in _URL_USERINFO.findall(line):
            user, colon, password = userinfo.partition(":")
            if not colon:  # https://TOKEN@host: the token is the secret
                values += [userinfo, unquote(userinfo)]
            for form in (password, unquote(password)) if colon else ():
                values += [form, f"{unquote(user)}:{form}"]
        if "=" in line:
            key, _, value = line.partition("=")
            key, value = key.strip(), value.strip().strip("\"'")
            name = key.rsplit(":", 1)[-1]
            if _USER_KEY.search(name):
                users.append(value)
            elif _SECRET_KEY.search(name):
                values.append(value)
                decoded = _b64decode(value)
                if name.lower() == "_password" and decoded:
                    passwords.append(decoded)  # npm keeps it in base64
                    values.append(decoded)
                elif name.lower() == "_auth" and decoded:
                    values.append(decoded)  # user:password
                    values.append(decoded.partition(":")[2])
        else:
            tokens = line.split()
            for i, word in enumerate(tokens[:-1]):
                if word in ("password", "passwd"):
                    passwords.append(tokens[i + 1])
                    values.append(tokens[i + 1])
                elif word == "login":
                    users.append(tokens[i + 1])
    values += [f"{u}:{p}" for u in users for p in passwords]
    if not values:
        values = [
            line.partition("=")[2].strip().strip("\"'") or line.strip()
            for line in text.splitlines()
            if line.strip() and not line.strip().startswith(("#", ";", "["))
        ]
    return sorted({v.encode() for v in values if v and not _NOT_SECRET.match(v)})


def encoded_forms(value: bytes) -> set[bytes]:
    """``value`` and the encodings that could carry it inside a longer text."""
    forms = {value, value.hex().encode(), value.hex().upper().encode()}
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        forms.update(_b64_cores(value, encode))
    for quoted in (quote_from_bytes(value, safe=""), quote_plus(value, safe="")):
        forms.add(quoted.encode())
        forms.add(re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), quoted).encode())
    return {f for f in forms if f}


def _b64_cores(value: bytes, encode: Callable[[bytes], bytes]) -> Iterator[bytes]:
    """For each alignment (the value starting 0, 1 or 2 bytes into a 3-byte group), the
    base64 characters that depend on the value's bytes alone: whatever precedes or
    follows it (padding included), the encoded text contains this core."""
    for offset in range(3):
        encoded = encode(b"\0" * offset + value)
        start = -(-8 * offset // 6)  # ceil: the first character free of the prefix
        end = 8 * (offset + len(value)) // 6  # the last one wholly inside the value
        yield encoded[start:end]


def _b64decode(value: str) -> str | None:
    try:
        raw = base64.b64decode(value + "=" * (-len(value) % 4), validate=True)
        return raw.decode("utf-8")
    except (binascii.Error, ValueError):
        return None


def _walk(root: Path) -> Iterable[Path]:
    stack = [root]
    while stack:
        here = stack.pop()
        with os.scandir(here) as entries:
            for entry in entries:
                path = Path(entry.path)
                if entry.is_dir(follow_symlinks=False):
                    stack.append(path)
                yield path
