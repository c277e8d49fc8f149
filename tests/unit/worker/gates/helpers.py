"""Real git repositories and real patches for the gate tests."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from tests.fakes import GIT_ENV, LocalDirSandbox, commit_files, git, make_git_repo
from worker.gates.base import GateContext
from worker.repo_config import RepoConfig
from worker.sandbox.base import SandboxFactory
from worker.settings import GateSettings

PYTEST = f"{shlex.quote(sys.executable)} -m pytest -q -p no:cacheprovider"


def make_patch(repo: Path, changes: Mapping[str, str | bytes | None]) -> str:
    """Write ``changes`` (None deletes) in ``repo``, return ``git diff --binary`` of them
    against HEAD, and put the work tree back as it was."""
    for rel, content in changes.items():
        target = repo / rel
        if content is None:
            target.unlink()
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                target.write_bytes(content)
            else:
                target.write_text(content)
    git(repo, "add", "-A")
    # Not through git(): it strips the output, and a diff can end in blank context lines.
    patch = subprocess.run(
        ["git", "diff", "--cached", "--binary", "-M", "HEAD"],
        cwd=repo,
        env={**os.environ, **GIT_ENV},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    git(repo, "reset", "-q", "--hard", "HEAD")
    return patch


def make_ctx(
    repo: Path,
    base: str,
    patch: str,
    *,
    config: RepoConfig | None = None,
    settings: GateSettings | None = None,
    issue_text: str = "",
    issue_labels: tuple[str, ...] = (),
    sandbox_factory: SandboxFactory = LocalDirSandbox,
) -> GateContext:
    return GateContext(
        repo_dir=repo,
        base_commit=base,
        patch=patch,
        repo_config=config or RepoConfig(test=PYTEST),
        gate_settings=settings or GateSettings(),
        sandbox_factory=sandbox_factory,
        issue_text=issue_text,
        issue_labels=issue_labels,
    )


def repo_with(tmp_path: Path, files: Mapping[str, str]) -> tuple[Path, str]:
    repo = tmp_path / "repo"
    return repo, make_git_repo(repo, files)


__all__ = ["PYTEST", "commit_files", "make_ctx", "make_patch", "repo_with"]
