"""Host git: the one way Ribbit runs ``git`` on the host.

Every checkout the bot, the worker or the trainer touches may hold untrusted content
(an issue's repository, a model's patch, a sandbox's export), so every host git runs:

- with no hooks and no fsmonitor (both run programs named by the checkout);
- with no system or user config (filter drivers, pagers, helpers live there) and
  ``HOME`` pointing nowhere;
- with an environment built from an allow-list, so no secret of the process leaks
  into git or the programs it starts;
- with no prompt (a prompt would hang a worker) and a bounded time.

Config is passed through ``GIT_CONFIG_COUNT``/``GIT_CONFIG_KEY_n``/``GIT_CONFIG_VALUE_n``
rather than ``-c``: a value (the forge's auth header) never shows in argv, where ``ps``
and git's own error messages would show it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path

GIT_TIMEOUT_S = 300

# Command-level config overrides the checkout's own .git/config.
_HARDENING: tuple[tuple[str, str], ...] = (
    ("core.hooksPath", os.devnull),
    ("core.fsmonitor", "false"),
)
# Some checkouts are owned by another uid than the process (a sandbox's, a clone made
# as root); git refuses them unless told. Only callers that need it ask for it.
_ANY_OWNER = ("safe.directory", "*")
_DEFAULT_PATH = "/usr/bin:/bin"
_SHA = re.compile(r"^[0-9a-fA-F]{7,40}$")
# What rev-parse prints for a commit: a full SHA-1 or SHA-256 object name.
_FULL_SHA = re.compile(r"[0-9a-f]{40,64}")


class GitError(RuntimeError):
    """A host git command failed or ran out of time; the message says which and why."""


def identity(name: str, email: str) -> dict[str, str]:
    """The author and committer variables for commits made as ``name``."""
    return {
        "GIT_AUTHOR_NAME": name,
        "GIT_AUTHOR_EMAIL": email,
        "GIT_COMMITTER_NAME": name,
        "GIT_COMMITTER_EMAIL": email,
    }


def git_env(
    *,
    config: Iterable[tuple[str, str]] = (),
    any_owner: bool = True,
    inherit: Iterable[str] = (),
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The whole environment of one host git: the allow-list, the hardening config plus
    ``config``, the variables named in ``inherit`` copied from this process (e.g. TLS
    settings for a clone over HTTPS) and ``extra`` (identity, dates)."""
    env = {key: os.environ[key] for key in inherit if key in os.environ}
    env.update(
        {
            "PATH": os.environ.get("PATH", _DEFAULT_PATH),
            "HOME": os.devnull,
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_ASKPASS": "/bin/false",
            "SSH_ASKPASS": "/bin/false",
        }
    )
    # A fixed identity, so nothing falls back to the host's user and hostname (reflogs,
    # the odd commit); callers that commit as someone pass ``extra``.
    env.update(identity("ribbit", "ribbit@localhost"))
    pairs = [*_HARDENING, *([_ANY_OWNER] if any_owner else []), *config]
    env["GIT_CONFIG_COUNT"] = str(len(pairs))
    for index, (key, value) in enumerate(pairs):
        env[f"GIT_CONFIG_KEY_{index}"] = key
        env[f"GIT_CONFIG_VALUE_{index}"] = value
    # Identity and dates only: they cannot turn the hardening off.
    for key, value in (extra or {}).items():
        if not key.startswith(("GIT_AUTHOR_", "GIT_COMMITTER_")):
            raise ValueError(f"not an identity variable: {key}")
        env[key] = value
    return env


def run_git(
    cwd: Path | None,
    *args: str,
    stdin: bytes | None = None,
    identity: Mapping[str, str] | None = None,
    config: Iterable[tuple[str, str]] = (),
    any_owner: bool = True,
    inherit: Iterable[str] = (),
    timeout: float = GIT_TIMEOUT_S,
) -> subprocess.CompletedProcess[bytes]:
    """Run host git once and return what it did; raises ``subprocess.TimeoutExpired``
    past ``timeout``. ``identity`` sets the author/committer (see :func:`identity`)."""
    env = git_env(config=config, any_owner=any_owner, inherit=inherit, extra=identity)
    return subprocess.run(
        ["git", *args],
        cwd=cwd,
        env=env,
        input=stdin,
        capture_output=True,
        timeout=timeout,
        check=False,
    )


def git_ok(
    cwd: Path | None,
    *args: str,
    stdin: bytes | None = None,
    identity: Mapping[str, str] | None = None,
    any_owner: bool = True,
    timeout: float = GIT_TIMEOUT_S,
) -> bytes:
    """Host git's stdout; GitError when it fails or runs out of time."""
    try:
        proc = run_git(
            cwd, *args, stdin=stdin, identity=identity, any_owner=any_owner, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        raise GitError(f"git {args[0]} timed out after {timeout:g}s") from None
    if proc.returncode != 0:
        reason = proc.stderr.decode(errors="replace").strip()
        raise GitError(f"git {args[0]} failed: {reason}")
    return proc.stdout


def head_commit(repo: Path) -> str | None:
    """The commit checkout ``repo`` is at (None when it is not a git checkout)."""
    try:
        proc = run_git(repo, "rev-parse", "--verify", "-q", "HEAD^{commit}", timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    sha = proc.stdout.decode(errors="replace").strip()
    return sha if proc.returncode == 0 and _FULL_SHA.fullmatch(sha) else None


def resolve_commit(repo: Path, rev: str, *, any_owner: bool = True) -> str:
    """The full sha of ``rev``, which must look like a sha (never an option or a path)."""
    if not _SHA.fullmatch(rev):
        raise GitError(f"{rev!r} is not a commit sha")
    out = git_ok(
        repo, "rev-parse", "--verify", "--end-of-options", f"{rev}^{{commit}}", any_owner=any_owner
    )
    return out.decode().strip()


def revision_commit(repo: Path, rev: str) -> str:
    """The full sha of the commit a person's revision names (``f51a53b``, ``main~2``,
    ``v1.2^``) in their own repository; never read as an option (``--end-of-options``).
    For revisions typed at the command line, not ones from a forge or a patch."""
    proc = run_git(
        repo, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}"
    )
    sha = proc.stdout.decode(errors="replace").strip()
    if proc.returncode != 0 or not _FULL_SHA.fullmatch(sha):
        raise GitError(f"{rev!r} names no commit in {repo}")
    return sha


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


def latest_tag(repo: Path, commit: str = "HEAD", *, any_owner: bool = True) -> str | None:
    """The nearest tag at ``commit``: the version the task text's footer shows, as
    SWE-bench's ``version`` (None without one). One home for the solve job, ``ribbit
    run`` and the environment builder, so all three show the model the same footer."""
    try:
        tag = git_ok(repo, "describe", "--tags", "--abbrev=0", commit, any_owner=any_owner)
    except GitError:
        return None
    return tag.decode(errors="replace").strip() or None
