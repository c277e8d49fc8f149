"""Text the bot does not control is made inert before it reaches the forge."""

from __future__ import annotations

import pytest

from bot.forges.sanitize import closed_issue_numbers, sanitize_forge_text
from worker.status import Status, render_status


@pytest.mark.parametrize(
    ("text", "must_not_contain"),
    [
        ("ping @maya and @acme/security", "@maya"),
        ("this fixes #12", "fixes #12"),
        ("Closes: #7 now", "Closes: #7"),
        ("resolves other/repo#3", "resolves other/repo#3"),
        ("fixed https://github.com/a/b/issues/9", "fixed https://github.com/a/b/issues/9"),
        ("![x](https://evil.example/track.png)", "![x]"),
        ('<img src="https://evil.example/t.png">', "<img"),
        ("<IMG SRC=x>", "<IMG"),
    ],
)
def test_sanitize_forge_text_makes_text_inert(text: str, must_not_contain: str) -> None:
    assert must_not_contain not in sanitize_forge_text(text)


def test_sanitize_forge_text_keeps_ordinary_text() -> None:
    plain = "Fixed the bug in `calc.add`; see the prefix fix in #12 discussion."
    assert sanitize_forge_text(plain) == plain


def test_status_comment_sanitises_the_gate_report() -> None:
    """Test ids and paths in the report come from the patch."""
    report = "- `tests/@acme/test_x.py::test_fixes #1` ![t](https://evil.example/p.png)"
    body = render_status("job", Status("failed", "no PR", report_markdown=report))
    assert "@acme" not in body and "![t]" not in body


def test_pr_body_sanitises_summary_and_report() -> None:
    from bot.store.gate_report import Verdict
    from worker.pipelines.publish import pr_body
    from worker.repo_config import RepoConfig

    body = pr_body(
        config=RepoConfig(link_issue="none"),
        issue=1,
        summary="done, cc @boss; closes #99",
        report_md="failing: tests/test_a.py::test_@team",
        model="m",
        exit_reason="completed",
        turns=1,
        seconds=1.0,
        job_id="j",
        verdict=Verdict.VERIFIED,
    )
    assert "@boss" not in body and "closes #99" not in body and "@team" not in body


@pytest.mark.parametrize(
    ("body", "numbers"),
    [
        ("Fixes #12 and closes #3.", ["12", "3"]),
        ("resolved #7", ["7"]),
        ("fixes #12abc", []),
        ("fixes #12_3", []),
        ("fixes: #12", []),
        ("fixes owner/repo#12", []),
        ("fixes https://github.com/o/r/issues/12", []),
        ("prefixes #12", []),
    ],
)
def test_closed_issue_numbers_are_this_repos_closing_references(
    body: str, numbers: list[str]
) -> None:
    assert closed_issue_numbers(body) == numbers
