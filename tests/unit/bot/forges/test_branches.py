from __future__ import annotations

import subprocess

import pytest

from bot.forges.branches import (
    UnsafeRefError,
    branch_name_for_issue,
    slugify,
    validate_branch_name,
    validate_repo_path,
    validate_sha,
)


@pytest.mark.parametrize(
    ("number", "title", "expected"),
    [
        (12, "Fix the add() function", "ribbit/issue-12-fix-the-add-function"),
        (3, "Ünïcödé  títle — with dashes", "ribbit/issue-3-unicode-title-with-dashes"),
        (4, "", "ribbit/issue-4-issue"),
        (5, "!!!", "ribbit/issue-5-issue"),
        (6, "$(rm -rf /); `id` ../../etc/passwd", "ribbit/issue-6-rm-rf-id-etc-passwd"),
        (7, "--force push HEAD@{0}", "ribbit/issue-7-force-push-head-0"),
    ],
)
def test_branch_name_for_issue_is_a_safe_slug(number: int, title: str, expected: str) -> None:
    assert branch_name_for_issue(number, title) == expected


def test_branch_name_slug_is_capped_at_a_word_boundary() -> None:
    name = branch_name_for_issue(1, "word " * 30)
    slug = name.removeprefix("ribbit/issue-1-")
    assert len(slug) <= 40
    assert not slug.endswith("-")
    assert slugify("a" * 100) == "a" * 40


@pytest.mark.parametrize("title", ["Fix add()", "x" * 300, "日本語のタイトル", "a..b", "tab\there"])
def test_branch_name_is_accepted_by_git(title: str) -> None:
    name = branch_name_for_issue(99, title)
    subprocess.run(["git", "check-ref-format", "--branch", name], check=True, capture_output=True)


def test_branch_name_rejects_nonpositive_issue_numbers() -> None:
    with pytest.raises(ValueError):
        branch_name_for_issue(0, "x")


@pytest.mark.parametrize(
    "name",
    [
        "-delete",
        "a..b",
        "a b",
        "a~1",
        "x^",
        "a:b",
        "a?",
        "a*",
        "a[",
        "a\\b",
        "/x",
        "x/",
        "x.",
        "x.lock",
        "a//b",
        "HEAD",
        "a@{1}",
        ".hidden",
        "a/.b",
        "",
        "a\nb",
        "a" * 201,
    ],
)
def test_validate_branch_name_rejects_unsafe(name: str) -> None:
    with pytest.raises(UnsafeRefError):
        validate_branch_name(name)


@pytest.mark.parametrize("name", ["main", "ribbit/issue-1-x", "release/1.2", "feature_x"])
def test_validate_branch_name_accepts_ordinary(name: str) -> None:
    assert validate_branch_name(name) == name


def test_validate_sha_and_path() -> None:
    assert validate_sha("a" * 40) == "a" * 40
    for bad in ["abc", "A" * 40, "g" * 40, "--all"]:
        with pytest.raises(UnsafeRefError):
            validate_sha(bad)
    assert validate_repo_path(".ribbit.yml") == ".ribbit.yml"
    for bad in ["/etc/passwd", "../x", "a/../b", "a//b", "", "a\0b", "a\\b", "./x"]:
        with pytest.raises(UnsafeRefError):
            validate_repo_path(bad)
