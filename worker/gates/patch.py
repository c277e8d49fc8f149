"""A unified git diff, parsed into what the gates judge: which paths change, how, and
which lines are added or removed.

We parse the text ourselves rather than use ``unidiff``: the gates need git's extended
headers (modes, renames, copies, binary patches), C-quoted paths, and a path normaliser
that sees through ``a/../.github/x``; those are the parts a generic parser gets least
right, and the hygiene gate must judge the text even when ``git apply`` rejects it.
Hunk bodies are read by their line counts, so a removed line that reads ``--- x`` is
never mistaken for a new file header.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from typing import Literal

ChangeStatus = Literal["added", "deleted", "modified", "renamed", "copied"]

_HUNK_RE = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_C_ESCAPES = {
    "a": "\a",
    "b": "\b",
    "t": "\t",
    "n": "\n",
    "v": "\v",
    "f": "\f",
    "r": "\r",
    '"': '"',
    "\\": "\\",
}
SYMLINK_MODE = "120000"
GITLINK_MODE = "160000"


class PatchParseError(ValueError):
    """The text is not a unified diff we can read."""


@dataclass(frozen=True)
class RepoPath:
    """A path as the patch wrote it, and what it means inside the repository."""

    raw: str
    path: str  # normalised: no "./", no "..", no doubled slashes
    escapes: bool  # absolute, climbs out of the repository, or reaches into .git

    def __str__(self) -> str:
        return self.path


def normalize_repo_path(raw: str) -> RepoPath:
    """Normalise a repository-relative path so checks see what git would touch."""
    absolute = raw.startswith("/") or bool(re.match(r"^[A-Za-z]:[\\/]", raw))
    norm = posixpath.normpath(raw.replace("\\", "/")) if raw else ""
    norm = norm.lstrip("/")
    parts = norm.split("/")
    escapes = (
        absolute
        or norm in {"", "."}
        or parts[0] == ".."
        or any(p.casefold() == ".git" for p in parts)
    )
    return RepoPath(raw=raw, path=norm, escapes=escapes)


@dataclass(frozen=True)
class FileChange:
    old: RepoPath | None  # None: the file is new
    new: RepoPath | None  # None: the file is deleted
    status: ChangeStatus
    binary: bool = False
    old_mode: str | None = None
    new_mode: str | None = None
    added: tuple[tuple[int, str], ...] = ()  # (line number in the new file, text)
    removed: tuple[tuple[int, str], ...] = ()  # (line number in the old file, text)

    @property
    def path(self) -> str:
        """The path a reader would name the change by (the new one unless deleted)."""
        target = self.new or self.old
        assert target is not None
        return target.path

    @property
    def paths(self) -> tuple[RepoPath, ...]:
        """Every path the change touches: both ends of a rename."""
        seen: list[RepoPath] = []
        for p in (self.old, self.new):
            if p is not None and all(p.path != s.path for s in seen):
                seen.append(p)
        return tuple(seen)

    @property
    def is_symlink(self) -> bool:
        return SYMLINK_MODE in {self.old_mode, self.new_mode}

    @property
    def is_submodule(self) -> bool:
        return GITLINK_MODE in {self.old_mode, self.new_mode}


@dataclass(frozen=True)
class ParsedPatch:
    files: tuple[FileChange, ...]

    @property
    def changed_lines(self) -> int:
        return sum(len(f.added) + len(f.removed) for f in self.files)


def unquote_git_path(text: str) -> str:
    """Undo git's C-style quoting ("a/\\303\\251.py") of unusual path names."""
    if not (len(text) >= 2 and text[0] == '"' and text[-1] == '"'):
        return text
    body = text[1:-1]
    out = bytearray()
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt in _C_ESCAPES:
                out += _C_ESCAPES[nxt].encode()
                i += 2
                continue
            octal = body[i + 1 : i + 4]
            if re.fullmatch(r"[0-7]{3}", octal):
                out.append(int(octal, 8))
                i += 4
                continue
        out += ch.encode()
        i += 1
    return out.decode("utf-8", errors="surrogateescape")


def _strip_prefix(path: str) -> str:
    """``git apply -p1``: drop the first component (``a/``, ``b/``)."""
    return path.split("/", 1)[1] if "/" in path else path


def _header_path(text: str) -> str | None:
    """The path of a ``---``/``+++`` line, or None for /dev/null."""
    text = text.split("\t", 1)[0] if not text.startswith('"') else text
    text = text.rstrip("\r")
    if text == "/dev/null":
        return None
    return _strip_prefix(unquote_git_path(text))


def _split_diff_git(rest: str) -> tuple[str, str] | None:
    """The two paths of ``diff --git a/X b/Y`` (spaces in names make it ambiguous)."""
    rest = rest.rstrip("\r")
    if rest.startswith('"'):
        end = _closing_quote(rest)
        first, second = rest[: end + 1], rest[end + 2 :]
        return _strip_prefix(unquote_git_path(first)), _strip_prefix(unquote_git_path(second))
    candidates = [i for i, ch in enumerate(rest) if ch == " "]
    if rest.endswith('"'):
        start = rest.rfind(' "')
        if start >= 0:
            return (_strip_prefix(rest[:start]), _strip_prefix(unquote_git_path(rest[start + 1 :])))
    for i in candidates:  # prefer the split where both halves name the same path
        a, b = rest[:i], rest[i + 1 :]
        if _strip_prefix(a) == _strip_prefix(b):
            return _strip_prefix(a), _strip_prefix(b)
    if candidates:
        i = candidates[len(candidates) // 2]
        return _strip_prefix(rest[:i]), _strip_prefix(rest[i + 1 :])
    return None


def _closing_quote(text: str) -> int:
    i = 1
    while i < len(text):
        if text[i] == "\\":
            i += 2
            continue
        if text[i] == '"':
            return i
        i += 1
    raise PatchParseError(f"unterminated quoted path: {text!r}")


class _FileBuilder:
    def __init__(self) -> None:
        self.old: str | None = None
        self.new: str | None = None
        self.git_old: str | None = None
        self.git_new: str | None = None
        self.status: ChangeStatus | None = None
        self.binary = False
        self.old_mode: str | None = None
        self.new_mode: str | None = None
        self.added: list[tuple[int, str]] = []
        self.removed: list[tuple[int, str]] = []
        self.saw_headers = False

    def build(self) -> FileChange:
        old = self.old if self.saw_headers else self.git_old
        new = self.new if self.saw_headers else self.git_new
        status = self.status
        if status is None:
            if old is None and new is not None:
                status = "added"
            elif new is None and old is not None:
                status = "deleted"
            else:
                status = "modified"
        if status == "added":
            old = None
        if status == "deleted":
            new = None
        if old is None and new is None:
            raise PatchParseError("a file section names no path")
        return FileChange(
            old=normalize_repo_path(old) if old is not None else None,
            new=normalize_repo_path(new) if new is not None else None,
            status=status,
            binary=self.binary,
            old_mode=self.old_mode,
            new_mode=self.new_mode,
            added=tuple(self.added),
            removed=tuple(self.removed),
        )


def parse_patch(text: str) -> ParsedPatch:
    """Parse a unified diff (git's, with its extended headers, or a plain one)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    files: list[FileChange] = []
    current: _FileBuilder | None = None
    i = 0

    def finish() -> None:
        nonlocal current
        if current is not None:
            files.append(current.build())
            current = None

    while i < len(lines):
        line = lines[i]
        if line.startswith("diff --git "):
            finish()
            current = _FileBuilder()
            split = _split_diff_git(line[len("diff --git ") :])
            if split:
                current.git_old, current.git_new = split
            i += 1
            continue
        if (
            line.startswith("--- ")
            and i + 1 < len(lines)
            and lines[i + 1].startswith("+++ ")
            and (current is None or current.saw_headers)
        ):
            finish()  # a plain (non-git) diff: each ---/+++ pair starts a file
            current = _FileBuilder()
        if current is None:
            i += 1  # preamble (a commit message, a mail header): not part of any file
            continue
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            current.old = _header_path(line[4:])
            current.new = _header_path(lines[i + 1][4:])
            current.saw_headers = True
            i += 2
            continue
        if line.startswith("@@ "):
            i = _read_hunk(lines, i, current)
            continue
        _read_extended_header(line, current)
        i += 1
    finish()
    return ParsedPatch(files=tuple(files))


def _read_extended_header(line: str, current: _FileBuilder) -> None:
    line = line.rstrip("\r")
    if line.startswith("new file mode "):
        current.status, current.new_mode = "added", line.split()[-1]
    elif line.startswith("deleted file mode "):
        current.status, current.old_mode = "deleted", line.split()[-1]
    elif line.startswith("old mode "):
        current.old_mode = line.split()[-1]
    elif line.startswith("new mode "):
        current.new_mode = line.split()[-1]
    elif line.startswith(("rename from ", "copy from ")):
        current.git_old = unquote_git_path(line.split(" ", 2)[2])
        current.status = "renamed" if line.startswith("rename") else "copied"
    elif line.startswith(("rename to ", "copy to ")):
        current.git_new = unquote_git_path(line.split(" ", 2)[2])
    elif line.startswith("index ") and " " in line[6:]:
        mode = line.split()[-1]
        current.old_mode = current.old_mode or mode
        current.new_mode = current.new_mode or mode
    elif line.startswith("GIT binary patch") or (
        line.startswith("Binary files ") and line.endswith(" differ")
    ):
        current.binary = True


def _read_hunk(lines: list[str], i: int, current: _FileBuilder) -> int:
    match = _HUNK_RE.match(lines[i])
    if not match:
        raise PatchParseError(f"malformed hunk header: {lines[i]!r}")
    old_line, new_line = int(match[1]), int(match[3])
    old_left = int(match[2]) if match[2] is not None else 1
    new_left = int(match[4]) if match[4] is not None else 1
    i += 1
    while i < len(lines) and (old_left > 0 or new_left > 0):
        body = lines[i]
        tag, content = (body[:1], body[1:]) if body else (" ", "")
        if tag == "+":
            current.added.append((new_line, content))
            new_line += 1
            new_left -= 1
        elif tag == "-":
            current.removed.append((old_line, content))
            old_line += 1
            old_left -= 1
        elif tag == " ":
            old_line += 1
            new_line += 1
            old_left -= 1
            new_left -= 1
        elif tag != "\\":  # "\ No newline at end of file" belongs to the line before
            raise PatchParseError(f"hunk ends early at line {i + 1}: {body[:60]!r}")
        i += 1
    while i < len(lines) and lines[i].startswith("\\"):
        i += 1
    return i
