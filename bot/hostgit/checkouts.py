"""Private copies of a host checkout: a clone at a commit (for the trainer and the
gates) and the diff of a sandbox's exported tree against its base. Nothing done in a
copy reaches the checkout it came from. Every git here runs through the core (core.py).
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from bot.hostgit.core import GitError, git_ok, run_git


def clone_at(source: Path | str, dest: Path, commit: str, *, any_owner: bool = True) -> Path:
    """A private clone of ``source`` (a repo or a bundle) checked out at ``commit``: no
    hard links into the source, so nothing done in the clone reaches it."""
    git_ok(
        Path.cwd(),
        "clone",
        "-q",
        "--no-hardlinks",
        "--end-of-options",
        str(source),
        str(dest),
        any_owner=any_owner,
    )
    git_ok(dest, "checkout", "-q", "--detach", commit, any_owner=any_owner)
    return dest


def detached_clone(repo_dir: Path, commit: str, dest: Path) -> Path:
    """A private clone of the host checkout ``repo_dir`` at ``commit`` in ``dest``, as the
    gates' trees are made: nothing checked out but ``commit``, no hard links into the
    source and no ``origin`` (the host path is nobody's business once the tree goes into
    a sandbox)."""
    git_ok(
        dest.parent,
        *("clone", "--quiet", "--no-checkout", "--no-hardlinks", "--"),
        *(str(repo_dir.resolve()), str(dest)),
    )
    git_ok(dest, "checkout", "--quiet", "--detach", commit)
    git_ok(dest, "remote", "remove", "origin")
    return dest


def host_diff(repo: Path, base: str, tree: Path, *, max_bytes: int = 32 * 1024 * 1024) -> str:
    """The diff from commit ``base`` of the host checkout ``repo`` to the files in
    ``tree`` (an export of a sandbox's workspace), computed by host git. The tree is
    only read; objects and index live in a throwaway bare clone, so nothing the sandbox
    wrote into its own ``.git`` (hooks, config, a doctored index) takes part."""
    root = Path(tempfile.mkdtemp(prefix="ribbit-hostdiff-"))
    try:
        gitdir = root / "git"
        git_ok(
            root, "clone", "--quiet", "--bare", "--shared", "--", str(repo.resolve()), str(gitdir)
        )
        where = [f"--git-dir={gitdir}", f"--work-tree={tree}", "-c", "core.quotePath=false"]
        git_ok(root, *where, "read-tree", base)
        git_ok(root, *where, "add", "-A")
        proc = run_git(
            root,
            *where,
            "diff",
            "--cached",
            "--binary",
            "--no-ext-diff",
            "--no-textconv",
            "--no-color",
            "--no-renames",
            base,
        )
        if proc.returncode != 0:
            raise GitError(f"git diff failed: {proc.stderr.decode(errors='replace')[-500:]}")
        if len(proc.stdout) > max_bytes:
            raise GitError(f"the diff is over {max_bytes} bytes")
        return proc.stdout.decode("utf-8", errors="surrogateescape")
    finally:
        shutil.rmtree(root, ignore_errors=True)
