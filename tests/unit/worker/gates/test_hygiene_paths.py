"""Every entry of hygiene's path lists, one by one: a list entry that is dropped or
misspelt fails its row, and a new entry without a row fails the coverage check."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.worker.gates.helpers import make_ctx
from worker.gates import autorun, hygiene
from worker.gates.hygiene import check_paths
from worker.gates.patch import FileChange, normalize_repo_path

# (the list entry, a path the entry must block), written as a repository spells it.
CI_DIRS = [
    (".github/workflows/", ".github/workflows/ci.yml"),
    (".github/actions/", ".github/actions/setup/action.yml"),
    (".circleci/", ".circleci/config.yml"),
    (".buildkite/", ".buildkite/pipeline.yml"),
    (".gitlab/ci/", ".gitlab/ci/test.gitlab-ci.yml"),
    (".azure-pipelines/", ".azure-pipelines/build.yml"),
    (".woodpecker/", ".woodpecker/test.yml"),
    (".tekton/", ".tekton/pipeline.yaml"),
    (".teamcity/", ".teamcity/settings.kts"),
    (".semaphore/", ".semaphore/semaphore.yml"),
    (".ci/", ".ci/build.sh"),
]
CI_FILES = [
    (".gitlab-ci.yml", ".gitlab-ci.yml"),
    (".gitlab-ci.yaml", ".gitlab-ci.yaml"),
    ("jenkinsfile", "Jenkinsfile"),
    ("azure-pipelines.yml", "azure-pipelines.yml"),
    ("azure-pipelines.yaml", "azure-pipelines.yaml"),
    (".travis.yml", ".travis.yml"),
    (".drone.yml", ".drone.yml"),
    (".drone.yaml", ".drone.yaml"),
    ("bitbucket-pipelines.yml", "bitbucket-pipelines.yml"),
    (".appveyor.yml", ".appveyor.yml"),
    ("appveyor.yml", "appveyor.yml"),
    ("cloudbuild.yaml", "cloudbuild.yaml"),
    ("cloudbuild.yml", "cloudbuild.yml"),
    (".woodpecker.yml", ".woodpecker.yml"),
    ("codemagic.yaml", "codemagic.yaml"),
    (".pre-commit-config.yaml", ".pre-commit-config.yaml"),
    (".github/codeowners", ".github/CODEOWNERS"),
    ("codeowners", "CODEOWNERS"),
    (".github/dependabot.yml", ".github/dependabot.yml"),
    ("buildspec.yml", "buildspec.yml"),
]
GATE_CONFIG = [
    (".ribbit.yml", ".ribbit.yml"),
    (".ribbit.yaml", ".ribbit.yaml"),
    (".semgrep.yml", ".semgrep.yml"),
    (".semgrep.yaml", ".semgrep.yaml"),
    (".semgrepignore", ".semgrepignore"),
    (".gitmodules", ".gitmodules"),
    (".gitattributes", ".gitattributes"),
]
AUTO_RUN_FILES = [
    (".vscode/tasks.json", ".vscode/tasks.json"),
    (".vscode/settings.json", ".vscode/settings.json"),
    (".vscode/launch.json", ".vscode/launch.json"),
    (".envrc", ".envrc"),
    (".env", ".env"),
    (".env.local", ".env.local"),
    (".pre-commit-config.yml", ".pre-commit-config.yml"),
    (".pre-commit-hooks.yaml", ".pre-commit-hooks.yaml"),
    ("lefthook.yml", "lefthook.yml"),
    ("lefthook.yaml", "lefthook.yaml"),
    (".lefthook.yml", ".lefthook.yml"),
    (".lefthook.yaml", ".lefthook.yaml"),
    ("lefthook-local.yml", "lefthook-local.yml"),
    (".huskyrc", ".huskyrc"),
    (".huskyrc.json", ".huskyrc.json"),
    (".huskyrc.js", ".huskyrc.js"),
    (".simple-git-hooks.json", ".simple-git-hooks.json"),
    (".simple-git-hooks.js", ".simple-git-hooks.js"),
    (".simple-git-hooks.cjs", ".simple-git-hooks.cjs"),
    (".lintstagedrc", ".lintstagedrc"),
    (".lintstagedrc.json", ".lintstagedrc.json"),
    (".lintstagedrc.js", ".lintstagedrc.js"),
    (".lintstagedrc.yml", ".lintstagedrc.yml"),
    ("lint-staged.config.js", "lint-staged.config.js"),
    ("lint-staged.config.mjs", "lint-staged.config.mjs"),
    (".gitpod.yml", ".gitpod.yml"),
    (".gitpod.dockerfile", ".gitpod.Dockerfile"),
    ("mise.toml", "mise.toml"),
    (".mise.toml", ".mise.toml"),
    (".replit", ".replit"),
]
AUTO_RUN_DIRS = [
    (".husky/", ".husky/pre-commit"),
    (".githooks/", ".githooks/pre-push"),
    (".git-hooks/", ".git-hooks/post-checkout"),
    (".lefthook/", ".lefthook/pre-commit/lint.sh"),
    (".idea/", ".idea/runConfigurations/startup.xml"),
    (".fleet/", ".fleet/run.json"),
    (".zed/", ".zed/tasks.json"),
    (".mise/", ".mise/tasks/setup"),
]
AUTO_RUN_SUFFIXES = [(".code-workspace", "calc.code-workspace")]
PACKAGE_INDEX = [
    ("pip.conf", "pip.conf"),
    ("pip.ini", "pip.ini"),
    (".pypirc", ".pypirc"),
    (".npmrc", ".npmrc"),
    (".yarnrc", ".yarnrc"),
    (".yarnrc.yml", ".yarnrc.yml"),
    (".pnpmrc", ".pnpmrc"),
    ("bunfig.toml", "bunfig.toml"),
    ("uv.toml", "uv.toml"),
    (".condarc", ".condarc"),
    ("nuget.config", "NuGet.Config"),
    (".gemrc", ".gemrc"),
    (".bundle/config", ".bundle/config"),
]


def _rules_for(path: str) -> set[str]:
    ctx = make_ctx(Path("/nonexistent"), "HEAD", "")
    rp = normalize_repo_path(path)
    change = FileChange(old=rp, new=rp, status="modified")
    return {f.rule for f in check_paths(ctx, change) if f.severity == "error"}


@pytest.mark.parametrize(
    ("rule", "path"),
    [("ci-config", p) for _, p in CI_DIRS + CI_FILES]
    + [("gate-config", p) for _, p in GATE_CONFIG]
    + [("auto-run-file", p) for _, p in AUTO_RUN_FILES + AUTO_RUN_DIRS + AUTO_RUN_SUFFIXES]
    + [("package-index", p) for _, p in PACKAGE_INDEX],
)
def test_every_listed_path_is_blocked(rule: str, path: str) -> None:
    assert rule in _rules_for(path)


def test_the_tables_cover_every_entry_of_the_lists() -> None:
    assert len(CI_DIRS) + len(CI_FILES) == 31
    assert [e for e, _ in CI_DIRS] == list(hygiene._CI_DIRS)
    assert {e for e, _ in CI_FILES} == hygiene._CI_FILES
    assert {e for e, _ in GATE_CONFIG} == hygiene._GATE_CONFIG
    assert {e for e, _ in AUTO_RUN_FILES} == autorun.AUTO_RUN_FILES
    assert [e for e, _ in AUTO_RUN_DIRS] == list(autorun.AUTO_RUN_DIRS)
    assert [e for e, _ in AUTO_RUN_SUFFIXES] == list(autorun.AUTO_RUN_SUFFIXES)
    assert {e for e, _ in PACKAGE_INDEX} == autorun.PACKAGE_INDEX_FILES


@pytest.mark.parametrize(
    "path",
    [
        "Jenkinsfile.release",
        "ci/Jenkinsfile",
        "sub/.gitlab-ci.yml",
        ".GITHUB/WORKFLOWS/ci.yml",
        "backend/.envrc",
        "web/.npmrc",
        "tools/.env",
    ],
)
def test_listed_names_are_found_at_any_depth_or_case(path: str) -> None:
    assert _rules_for(path) & {"ci-config", "auto-run-file", "package-index"}


@pytest.mark.parametrize(
    "path",
    [
        "calc/core.py",
        "docs/ci.md",
        ".github/ISSUE_TEMPLATE/bug.md",
        "src/environment.py",
        ".env.example",
        "vscode/tasks.json",
        "docs/husky.md",
        "requirements.txt",
        "package.json",
    ],
)
def test_ordinary_paths_are_not_blocked(path: str) -> None:
    assert _rules_for(path) == set()
