"""The "before" and "after" trees every gate compares.

Both are private clones of the host checkout in a temporary folder, so neither the
gates nor the commands they run in sandboxes ever change ``ctx.repo_dir``. The
patch is applied with ``git apply --index``, which refuses paths outside the tree,
paths through symlinks and writes into ``.git``.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from bot.hostgit import GitError, detached_clone, run_git
from worker.gates.base import GateContext
from worker.gates.patch import ParsedPatch, PatchParseError, parse_patch


class PatchTreeError(Exception):
    """The trees could not be built; the message says why (for a PR comment)."""


class PatchApplyError(PatchTreeError):
    """The patch does not apply to the base commit."""


@dataclass(frozen=True)
class PatchTrees:
    before: Path  # the base commit, checked out
    after: Path  # the base commit with the patch applied (staged, not committed)
    parsed: ParsedPatch


@dataclass(frozen=True)
class AppliedChange:
    """One path as git itself applied it (``git diff --cached --raw``), not as the patch
    text reads: the judge of what a patch really does."""

    path: str
    status: str  # A, D, M, T (type change)
    old_mode: str  # "000000" when the path is new
    new_mode: str  # "000000" when the path is deleted


def applied_changes(after: Path) -> list[AppliedChange]:
    """Every path the applied patch changes in ``after`` (its index against HEAD),
    renames split into a delete and an add so both names are judged."""
    proc = run_git(after, "diff", "--cached", "--raw", "-z", "--no-renames", "--no-abbrev", "HEAD")
    if proc.returncode != 0:
        raise PatchTreeError("git could not list what the patch changes")
    fields = proc.stdout.decode(errors="surrogateescape").split("\0")
    changes = []
    for meta, path in zip(fields[0::2], fields[1::2], strict=False):
        parts = meta.lstrip(":").split()
        if len(parts) < 5 or not path:
            continue
        changes.append(
            AppliedChange(path=path, status=parts[4][:1], old_mode=parts[0], new_mode=parts[1])
        )
    return changes


def read_base_file(ctx: GateContext, path: str) -> bytes | None:
    """A file's content at the base commit, read from git's objects (never the work tree)."""
    proc = run_git(ctx.repo_dir, "cat-file", "blob", f"{ctx.base_commit}:{path}")
    return proc.stdout if proc.returncode == 0 else None


def _check_base_commit(ctx: GateContext) -> None:
    base = ctx.base_commit
    if not base or base.startswith("-") or not all(c.isalnum() or c in "._/^~-" for c in base):
        raise PatchTreeError(f"invalid base commit {base!r}")
    if run_git(ctx.repo_dir, "rev-parse", "--verify", "--quiet", f"{base}^{{commit}}").returncode:
        raise PatchTreeError(f"base commit {base} is not in {ctx.repo_dir}")


def regular_file_inside(tree: Path, rel: str) -> Path | None:
    """``tree/rel`` if it is a regular file really inside ``tree``: a patch can add
    symlinks, and nothing on the host may follow one out of the tree."""
    candidate = tree / rel
    try:
        if candidate.is_symlink() or not candidate.is_file():
            return None
        resolved = candidate.resolve(strict=True)
    except OSError:
        return None
    if not resolved.is_relative_to(tree.resolve()):
        return None
    return resolved


def read_head(tree: Path, rel: str, limit: int) -> bytes | None:
    """The first ``limit`` bytes of ``tree/rel`` when it is a regular file inside the tree
    (:func:`regular_file_inside`); None when it is not, or cannot be read."""
    file = regular_file_inside(tree, rel)
    if file is None:
        return None
    try:
        with file.open("rb") as fh:
            return fh.read(limit)
    except OSError:
        return None


@contextmanager
def patch_trees(ctx: GateContext) -> Iterator[PatchTrees]:
    """Build both trees; raises PatchApplyError when the patch does not apply."""
    try:
        parsed = parse_patch(ctx.patch)
    except PatchParseError as exc:
        raise PatchApplyError(f"the patch is not a readable unified diff: {exc}") from None
    if not parsed.files:
        raise PatchApplyError("the patch is empty: it changes no file")
    _check_base_commit(ctx)
    root = Path(tempfile.mkdtemp(prefix="ribbit-gates-"))
    try:
        before, after = root / "before", root / "after"
        for dest in (before, after):
            try:
                detached_clone(ctx.repo_dir, ctx.base_commit, dest)
            except GitError as exc:
                raise PatchTreeError(str(exc)) from None
        patch_bytes = ctx.patch.encode("utf-8", errors="surrogateescape")
        if not patch_bytes.endswith(b"\n"):
            patch_bytes += b"\n"
        applied = run_git(
            after, "apply", "--index", "--binary", "--whitespace=nowarn", "-", stdin=patch_bytes
        )
        if applied.returncode != 0:
            reason = applied.stderr.decode(errors="replace").strip() or "git apply failed"
            raise PatchApplyError(f"the patch does not apply to {ctx.base_commit[:12]}: {reason}")
        yield PatchTrees(before=before, after=after, parsed=parsed)
    finally:
        shutil.rmtree(root, ignore_errors=True)
