"""Per-repository configuration: ``.ribbit.yml`` on the default branch.

Only the default branch's copy is read (never a PR's or a fork's): the file
decides which commands run in the sandbox and which paths the bot may touch,
so letting a PR change it would let anyone change the rules for their PR.
Hygiene blocks patches that touch the file for the same reason.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

# What runs when neither .ribbit.yml nor the tree names a test command
# (worker/gates/testcmd.py falls back to it too).
DEFAULT_TEST_COMMAND = "python -m pytest -q"

CONFIG_PATH = ".ribbit.yml"


class RepoConfigError(ValueError):
    """An invalid .ribbit.yml; the message is meant for an issue comment."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PathRules(_Model):
    allow: list[str] = Field(
        default_factory=lambda: ["**"], description="Globs the bot may change."
    )
    deny: list[str] = Field(default_factory=list, description="Globs the bot must never change.")


class AgentLimits(_Model):
    max_turns: int | None = Field(default=None, ge=1, le=500)
    max_minutes: float | None = Field(default=None, gt=0, le=240)
    max_new_tokens: int | None = Field(default=None, ge=16, le=32_768)
    max_context_tokens: int | None = Field(default=None, ge=1024, le=262_144)
    temperature: float | None = Field(default=None, ge=0, le=2)


class PromptRules(_Model):
    include_repo_context: bool = Field(
        default=False,
        description="Append the repo's instructions (instructions below, else AGENTS.md) and "
        "hints (setup and test commands) to the task. Off: the model sees the task text "
        "alone, as in the harness it was trained in.",
    )
    instructions: str | None = Field(
        default=None, max_length=20_000, description="Instructions for the agent."
    )


class GateRules(_Model):
    allow_lockfiles: bool = Field(default=False, description="Let patches change lock files.")
    max_diff_lines: int | None = Field(default=None, ge=1, description="Overrides the deployment.")
    draft_on_failure: bool = Field(
        default=False,
        description="Open a draft PR with the failing report anyway (never for a patch "
        "that hygiene or Semgrep blocked: that report is posted as a comment instead).",
    )
    test_config_changes: Literal["block", "warn"] = Field(
        default="block",
        description="What a patch that changes test discovery or runner configuration "
        "(pytest.ini, conftest.py, [tool.pytest], jest config, Makefile test targets) gets.",
    )
    semgrep_rules: list[str] = Field(
        default_factory=list, description="Extra Semgrep rule files in the repo."
    )
    behaviour_change_labels: list[str] = Field(
        default_factory=list,
        max_length=20,
        description="Issue labels under which reviewers accept, as verified, a patch that "
        "changes a behaviour the repository's tests pinned and edits those tests to match "
        "(the PR body still shows each moved assertion). Without one such a patch is at "
        "most unverified.",
    )
    unverified: Literal["draft", "refuse"] = Field(
        default="draft",
        description="What a patch gets that nothing blocked but no test shows to fix the "
        "issue (no test fails without it): a draft PR saying 'Not verified' and "
        "referring to the issue without closing it, or no PR.",
    )


class ReviseRules(_Model):
    on_changes_requested: bool = Field(
        default=True,
        description="A 'changes requested' review on the bot's PR asks for a revision.",
    )
    max_revisions: int = Field(default=5, ge=0, le=50)


class RepoConfig(_Model):
    """The schema of ``.ribbit.yml``; every key is optional."""

    label: str | None = Field(default=None, description="Trigger label (overrides RIBBIT_LABEL).")
    setup: str | None = Field(default=None, description="Setup command, e.g. pip install -e .")
    setup_hosts: list[str] = Field(
        default_factory=list,
        max_length=50,
        description="Extra registry hosts the setup command may reach (only those the "
        "deployment lets repositories add: RIBBIT_SANDBOX__REPO_SETUP_HOSTS).",
    )
    patch_install_scripts: bool = Field(
        default=False,
        description="Let package install scripts run when a judged patch's changed "
        "dependency manifests are installed again (ribbit gates, the grader); off: npm "
        "lifecycle scripts are ignored and pip installs wheels only.",
    )
    image: str | None = Field(
        default=None,
        max_length=300,
        description="Sandbox image for this repository (docker backend; only images the "
        "deployment allows: RIBBIT_SANDBOX__REPO_IMAGES).",
    )
    test: str = Field(
        default=DEFAULT_TEST_COMMAND,
        description="Test command (when absent, detected per ecosystem: worker/gates/testcmd.py).",
    )
    paths: PathRules = Field(default_factory=PathRules)
    reviewers: list[str] = Field(default_factory=list)
    labels: list[str] = Field(default_factory=list, description="Labels put on the draft PR.")
    link_issue: Literal["fixes", "closes", "refs", "none"] = Field(
        default="fixes", description="How the PR body links the issue."
    )
    agent: AgentLimits = Field(default_factory=AgentLimits)
    prompt: PromptRules = Field(default_factory=PromptRules)
    gates: GateRules = Field(default_factory=GateRules)
    revise: ReviseRules = Field(default_factory=ReviseRules)


def parse_repo_config(text: str | None) -> RepoConfig:
    """Parse a ``.ribbit.yml``; absent or empty means all defaults."""
    if text is None or not text.strip():
        return RepoConfig()
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise RepoConfigError(f"{CONFIG_PATH} is not valid YAML: {exc}") from None
    if data is None:
        return RepoConfig()
    if not isinstance(data, dict):
        raise RepoConfigError(f"{CONFIG_PATH} must be a mapping at the top level")
    try:
        return RepoConfig.model_validate(data)
    except ValidationError as exc:
        problems = [
            f"`{'.'.join(str(p) for p in err['loc']) or '(top)'}`: {err['msg']}"
            for err in exc.errors()
        ]
        raise RepoConfigError(f"{CONFIG_PATH} is invalid:\n- " + "\n- ".join(problems)) from None


def read_repo_config(repo_dir: Path, rev: str = "HEAD") -> RepoConfig:
    """The ``.ribbit.yml`` committed at ``rev`` of a local clone (absent: all defaults):
    what ``ribbit run``, ``ribbit gates`` and ``ribbit envs build`` read, parsed as the
    solve job parses the default branch's copy. The working tree's copy is never read:
    as on the forge, only a committed file sets the rules. Raises
    :class:`RepoConfigError` for an invalid file or a ``rev`` that is no commit."""
    from bot.hostgit import run_git  # hardened: the clone is untrusted content

    if rev.startswith("-"):
        raise RepoConfigError(f"{rev!r} is not a revision")
    if run_git(repo_dir, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}").returncode:
        raise RepoConfigError(f"{repo_dir}: {rev!r} is not a commit of a git repository")
    blob = run_git(repo_dir, "cat-file", "blob", f"{rev}:{CONFIG_PATH}")
    return parse_repo_config(blob.stdout.decode(errors="replace") if blob.returncode == 0 else None)
