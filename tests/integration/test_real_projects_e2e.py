"""Real Go and Rust projects, each with a bug fix from its own history, end to end: a
label on the local forge, the signed webhook, the job through Redis to a Celery worker,
the agent replaying the fix through its tools (Read, Edit) in a bubblewrap sandbox, the
gates with the project's own tests detected from the tree (no ``.ribbit.yml``), and a
draft PR whose diff is the upstream fix, with the fix's target tests named as passing.

- Go: dustin/go-humanize 402bd47 (#130, ``BigComma`` mutated its argument; adds
  ``TestHumanizeBigIntMutation``) and hashicorp/go-version 43575a7 (versions holding
  ``~``; its tests are already in the tree, the issue names them).
- Rust: rapidfuzz/strsim-rs 605c81c (``jaro("a", "a")`` was 0; adds two tests) and
  comex/rust-shlex 1.2.1's fix for GHSA-r7qv-8r2h-pg27 (tests in the tree, named by
  the issue).

The fixtures are vendored with their licences (tests/fixtures/*/README.md); none needs
a downloaded dependency.
"""

from __future__ import annotations

import difflib
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.fakes import commit_files, git, make_git_repo
from tests.integration.test_real_projects_go_rust import (
    GO_BASE,
    GO_MODULE,
    GO_UPSTREAM,
    RUST_BASE,
    RUST_UPSTREAM,
)
from tests.plugins.e2e import wait_for, xml_call
from tests.plugins.forge import BOT_LOGIN
from tests.support import require_service

pytestmark = pytest.mark.integration

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
_NOT_VENDORED = {"README.md", "fix.patch"}  # the fixture's own description and the fix


@dataclass(frozen=True)
class RealFix:
    repo: str  # on the local forge
    base: dict[str, str]  # the tree before the fix
    fixed: dict[str, str]  # the tree after it
    issue: tuple[str, str]
    tool: str  # the toolchain bubblewrap takes from the host
    targets: tuple[str, ...]  # what the verdict names
    target_ids: tuple[str, ...]  # those tests' ids in the runner's report
    tests_in_base: bool = False  # the fix adds no test; the issue names existing ones


def _vendored(name: str) -> dict[str, str]:
    root = FIXTURES / name
    return {
        str(p.relative_to(root)): p.read_text()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name not in _NOT_VENDORED
    }


def _with_patch(files: dict[str, str], patch: Path, where: Path) -> dict[str, str]:
    """``files`` with the upstream commit's own diff applied by git."""
    make_git_repo(where, files)
    subprocess.run(["git", "apply", str(patch)], cwd=where, check=True)
    return {rel: (where / rel).read_text() for rel in {*files, *_patch_paths(patch)}}


def _patch_paths(patch: Path) -> set[str]:
    return {
        line.split(" b/", 1)[1]
        for line in patch.read_text().splitlines()
        if line.startswith("diff --git ")
    }


def _edit_script(fix: RealFix) -> list[str]:
    """The fix as the agent makes it: read each changed file, then one Edit per hunk
    (three lines of context, as git shows it), then a closing message."""
    turns: list[str] = []
    edits: list[str] = []
    for rel in sorted(rel for rel in fix.fixed if fix.fixed[rel] != fix.base.get(rel)):
        assert rel in fix.base, "only edits here; a new file would be a Write"
        turns.append(xml_call("Read", file_path=rel))
        current = fix.base[rel]
        old_lines = current.splitlines(keepends=True)
        new_lines = fix.fixed[rel].splitlines(keepends=True)
        matcher = difflib.SequenceMatcher(a=old_lines, b=new_lines, autojunk=False)
        for group in matcher.get_grouped_opcodes(3):
            i1, i2 = group[0][1], group[-1][2]
            j1, j2 = group[0][3], group[-1][4]
            old, new = "".join(old_lines[i1:i2]), "".join(new_lines[j1:j2])
            assert current.count(old) == 1, f"{rel}: hunk not unique"
            current = current.replace(old, new)
            edits.append(xml_call("Edit", file_path=rel, old_string=old, new_string=new))
        assert current == fix.fixed[rel]
    return [*turns, *edits, "Fixed it as the issue describes; the tests cover it."]


def _humanize(tmp: Path) -> RealFix:
    base = _vendored("go-humanize")
    fixed = _with_patch(base, FIXTURES / "go-humanize" / "fix.patch", tmp / "humanize")
    return RealFix(
        repo="dustin/go-humanize",
        base=base,
        fixed=fixed,
        issue=(
            "BigComma modifies the big.Int passed to it",
            "Calling humanize.BigComma(v) twice on the same value gives a different "
            "string the second time: BigComma divides v in place. It should leave its "
            "argument alone.",
        ),
        tool="go",
        targets=("TestHumanizeBigIntMutation",),
        target_ids=("github.com/dustin/go-humanize::TestHumanizeBigIntMutation",),
    )


def _strsim(tmp: Path) -> RealFix:
    base = _vendored("strsim")
    fixed = _with_patch(base, FIXTURES / "strsim" / "fix.patch", tmp / "strsim")
    return RealFix(
        repo="rapidfuzz/strsim-rs",
        base=base,
        fixed=fixed,
        issue=(
            'jaro("a", "a") returns 0 instead of 1',
            "Jaro and Jaro-Winkler give 0.0 for two equal strings of length one; equal "
            "strings should give 1.0.",
        ),
        tool="cargo",
        targets=("jaro_same_one_character", "jaro_winkler_same_one_character"),
        target_ids=(
            "src/lib.rs::tests::jaro_same_one_character",
            "src/lib.rs::tests::jaro_winkler_same_one_character",
        ),
    )


def _go_version(tmp: Path) -> RealFix:
    return RealFix(
        repo="hashicorp/go-version",
        base=GO_BASE,
        fixed=GO_UPSTREAM,
        issue=(
            "Versions including ~ are malformed",
            "Debian-style versions such as 1.2.0-X-1.2.0+metadata~dist fail to parse: "
            "TestNewVersion and TestVersionMetadata fail on them.",
        ),
        tool="go",
        targets=("TestNewVersion", "TestVersionMetadata"),
        target_ids=(f"{GO_MODULE}::TestNewVersion", f"{GO_MODULE}::TestVersionMetadata"),
        tests_in_base=True,
    )


def _shlex(tmp: Path) -> RealFix:
    return RealFix(
        repo="comex/rust-shlex",
        base=RUST_BASE,
        fixed=RUST_UPSTREAM,
        issue=(
            "quote leaves { } and non-ASCII characters unquoted",
            "bytes::quote (and so quote and join) must quote `{`, `}` and every byte "
            "from 0x80 up: a shell expands them. See test_quote and test_join.",
        ),
        tool="cargo",
        targets=("test_quote", "test_join"),
        target_ids=(
            "src/lib.rs::bytes::test_quote",
            "src/lib.rs::test_quote",
            "src/lib.rs::bytes::test_join",
        ),
        tests_in_base=True,
    )


PROJECTS = {
    "go-humanize": _humanize,
    "strsim": _strsim,
    "go-version": _go_version,
    "shlex": _shlex,
}


@pytest.fixture(scope="module")
def fixes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, RealFix]:
    tmp = tmp_path_factory.mktemp("upstream")
    return {name: make(tmp) for name, make in PROJECTS.items()}


def _tree_diff(repo: Path, a: str, b: str) -> str:
    return subprocess.run(
        ["git", "diff", "--binary", a, b], cwd=repo, capture_output=True, text=True, check=True
    ).stdout


@pytest.mark.parametrize("project", list(PROJECTS))
def test_upstream_fix_reaches_a_draft_pr_identical_to_it(
    project: str,
    fixes: dict[str, RealFix],
    forge_world: Any,
    deployment_for: Any,
    tmp_path: Path,
) -> None:
    fix = fixes[project]
    require_service(Path("/usr/bin", fix.tool).exists(), f"{fix.tool} in /usr/bin")
    if fix.tool == "go":
        require_service(Path("/usr/bin/gotestsum").exists(), "gotestsum in /usr/bin")
    dep = deployment_for(_edit_script(fix), repo_files=fix.base, issue=fix.issue)
    forge = forge_world.forge
    forge.create_repo("github", fix.repo, files=fix.base)
    forge.add_collaborator("github", fix.repo, BOT_LOGIN, "write")
    forge.add_collaborator("github", fix.repo, "maya", "maintain")
    issue = forge.create_issue(
        "github", fix.repo, title=fix.issue[0], body=fix.issue[1], author="maya"
    )
    forge.add_label("github", fix.repo, issue.number, "ribbit", actor="maya")
    [job] = dep.store.list()
    job = wait_for(
        lambda: (j := dep.store.get(job.id)).state in {"succeeded", "failed"} and j,
        timeout=600,
        what="job end",
    )
    gates = {r["name"]: r for r in (job.result or {}).get("gates", {}).get("gates", [])}
    tests = gates.get("tests") or {}
    assert job.state == "succeeded", (job.failure_reason, tests.get("findings"), tests.get("logs"))
    [pr] = forge.pulls("github", fix.repo)
    assert pr.draft and f"Fixes #{issue.number}" in pr.body
    assert "Ribbit gates: passed" in pr.body

    # The PR's diff is the upstream fix: the same trees, so the same diff, byte for byte.
    local = tmp_path / "upstream"
    base = make_git_repo(local, fix.base)
    upstream = commit_files(local, fix.fixed, "the upstream fix")
    bare = forge.repo("github", fix.repo).bare
    git(local, "fetch", "-q", str(bare), pr.head_sha)
    assert _tree_diff(local, upstream, pr.head_sha) == ""
    assert _tree_diff(local, base, pr.head_sha) == _tree_diff(local, base, upstream) != ""

    # The verdict names the fix's tests, run by the project's own runner, passing.
    details = tests["details"]
    assert details["command_source"] != ".ribbit.yml"
    assert details["targets"] == sorted(fix.targets), details
    assert not details["target_failures"], tests["logs"]
    after = details["after"]
    assert after["per_test"] and after["counts"]["failed"] == 0, tests["logs"]
    assert not set(fix.target_ids) & set(after["failing"])
    shown = ", ".join(f"`{t}`" for t in sorted(fix.targets))
    assert f"Target tests passing with the patch: {shown}." in pr.body
    if fix.tests_in_base:  # named by the issue: they failed before the fix
        assert set(fix.target_ids) <= set(details["before"]["failing"]), details["before"]
