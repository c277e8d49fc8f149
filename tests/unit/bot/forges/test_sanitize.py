"""Text the bot does not control is made inert before it reaches the forge.

The closing-keyword cases are built from the forges' documented grammars, vendored in
tests/fixtures/forge_closing_grammar.json: every keyword x every reference form x colon
or not x "issue" word or not x every position in a list, on both forges. Two oracles
stand for the forges (GitLab's documented default pattern, compiled as written; GitHub's
documented keyword grammar): each case must close an issue before sanitising, so the
test can fail, and none after.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

import pytest

from bot.forges import redact
from bot.forges.sanitize import (
    ZWSP,
    closed_issue_numbers,
    sanitize_forge_text,
    sanitize_forge_title,
)
from worker.status import Status, render_status

GRAMMAR: dict[str, Any] = json.loads(
    (Path(__file__).parents[3] / "fixtures" / "forge_closing_grammar.json").read_text()
)
GITHUB, GITLAB = GRAMMAR["github"], GRAMMAR["gitlab"]

# GitLab's %{issue_ref} for a server at gitlab.example.com, as its docs describe it.
_GITLAB_ISSUE_REF = (
    r"(?:(?:[\w.-]+/)*[\w.-]+)?#\d+"
    r"|https?://gitlab\.example\.com/(?:[\w.-]+/)+(?:-/)?issues/\d+"
)
GITLAB_CLOSING = re.compile(
    GITLAB["default_closing_pattern"].replace("%{issue_ref}", f"(?:{_GITLAB_ISSUE_REF})")
)
_GITHUB_REF = r"#\d+|[\w.-]+/[\w.-]+#\d+|https://github\.com/[\w.-]+/[\w.-]+/issues/\d+"
GITHUB_CLOSING = re.compile(
    rf"\b(?:{'|'.join(GITHUB['keywords'])}):?\s+({_GITHUB_REF})", re.IGNORECASE
)


def gitlab_closes(text: str) -> list[str]:
    """What GitLab's documented default pattern closes in ``text``."""
    refs = []
    for match in GITLAB_CLOSING.finditer(text):
        refs += re.findall(_GITLAB_ISSUE_REF, match.group(0))
        refs += [match.group(3)] if match.group(3) else []  # an external tracker's id
    return refs


def github_closes(text: str) -> list[str]:
    return GITHUB_CLOSING.findall(text)


def closes_anything(text: str) -> bool:
    return bool(gitlab_closes(text) or github_closes(text))


def test_the_oracles_read_the_documented_examples_as_the_docs_do() -> None:
    example = GITLAB["example"]
    assert sorted(gitlab_closes(example["message"])) == sorted(example["closes"])
    assert github_closes(GITHUB["references"]["multiple issues"]) == [
        "#10",
        "#123",
        "octo-org/octo-repo#100",
    ]
    assert github_closes(GITHUB["optional_colon_example"]) == ["#10"]


def _shown(raw: str, out: str) -> None:
    """The reader sees what was written: only zero-width spaces were added."""
    assert out.replace(ZWSP, "") == raw


# Each forge's documented keywords with its documented reference forms: the oracle of
# that forge closes each case as written, and nothing once sanitised.
_DOCUMENTED = [
    *[
        ("github", keyword, ref, colon, "")
        for keyword in GITHUB["keywords"]
        for ref in GITHUB["reference_examples"]
        for colon in ("", ":")
    ],
    *[
        ("gitlab", keyword, ref, colon, word)
        for keyword in GITLAB["keywords"]
        for ref in [*GITLAB["reference_examples"], "JIRA-123"]
        for colon in ("", ":")
        for word in ("", "issue ", "issues ")
        if not (word and ref == "JIRA-123")  # the pattern takes an external id bare
    ],
]


@pytest.mark.parametrize(("forge", "keyword", "ref", "colon", "word"), _DOCUMENTED)
def test_every_documented_closing_form_is_neutralised(
    forge: str, keyword: str, ref: str, colon: str, word: str
) -> None:
    oracle = github_closes if forge == "github" else gitlab_closes
    text = f"This {keyword}{colon} {word}{ref} now."
    assert oracle(text) == [ref]  # the case closes as written: the test can fail
    out = sanitize_forge_text(text)
    assert not closes_anything(out) and ref not in out
    _shown(text, out)


# Wider than either grammar: any case, every keyword with every reference form of both
# forges and GitHub's GH- ids.
_KEYWORDS = sorted(set(GITLAB["keywords"]) | {k.upper() for k in GITHUB["keywords"]})
_REFERENCES = [*GITHUB["reference_examples"], *GITLAB["reference_examples"], "GH-12", "JIRA-1"]


@pytest.mark.parametrize("keyword", _KEYWORDS)
def test_every_keyword_with_every_reference_form_is_neutralised(keyword: str) -> None:
    for ref in _REFERENCES:
        for colon in ("", ":"):
            for word in ("", "issue ", "issues "):
                text = f"This {keyword}{colon} {word}{ref} now."
                out = sanitize_forge_text(text)
                assert ref not in out, text
                assert not closes_anything(out), text
                _shown(text, out)


@pytest.mark.parametrize("keyword", _KEYWORDS)
@pytest.mark.parametrize(
    "shape",
    [
        "{k} {a}, {b} and {c}",
        "{k} {a}, {b}, and {c}",
        "{k} {a},{b} , and {c}",
        "{k}: issues {a} and {b} and {c}",
        "{k} {a} {b} {c}",
        "{k} {a} or {b}, {c}.",
        "{k}:\n\n- {a}\n- {b}\n- {c}",
    ],
)
def test_every_item_of_a_list_after_a_keyword_is_neutralised(keyword: str, shape: str) -> None:
    refs = {"a": "#11", "b": "group/project#22", "c": "https://github.com/o/r/issues/33"}
    text = shape.format(k=keyword, **refs)
    out = sanitize_forge_text(text)
    for ref in refs.values():
        assert ref not in out, (text, ref)
    assert "#11" not in out and "#22" not in out
    _shown(text, out)


def test_the_gitlab_documented_examples_close_nothing_once_sanitised() -> None:
    example = GITLAB["example"]
    for text in (example["message"], GITLAB["list_example"]):
        assert closes_anything(text)
        out = sanitize_forge_text(text)
        assert not closes_anything(out)
        _shown(text, out)
    out = sanitize_forge_text(example["message"])
    assert all(ref not in out for ref in example["closes"])


def test_mixed_keywords_markup_and_lists_close_nothing() -> None:
    """Keywords, markup, glue and references strung together at random (a fixed seed:
    the same cases every run); whatever the oracles close before, nothing after."""
    rng = random.Random(32)
    pieces = [
        *_KEYWORDS,
        *_REFERENCES,
        *GITLAB["reference_examples"],
        " ",
        " ",
        ", ",
        " and ",
        ":",
        "\n",
        "**",
        "_",
        "`",
        "issue ",
        "&#32;",
        "\\",
        "(",
        ")",
        "[",
        "](",
        "<b>",
        "</b>",
        "@team",
        "word",
        "\u00ad",
        "\u200b",
    ]
    closing = 0
    for _ in range(3000):
        words = [rng.choice(pieces) for _ in range(rng.randint(2, 12))]
        text = "".join(word + rng.choice(("", " ", " ", " ")) for word in words)
        closing += closes_anything(text)
        out = sanitize_forge_text(text)
        assert not closes_anything(out), repr(text)
        assert out.replace(ZWSP, "") == text.replace(ZWSP, ""), repr(text)
    assert closing > 600, closing  # the cases do close before: the test can fail


@pytest.mark.parametrize(
    "text",
    [
        "FIXES #12",
        "fIxEs #12",
        "**Fixes** #12",
        "_Fixes_ #12",
        "Fixes **#12**",
        "`Fixes #12`",  # GitLab matches its pattern on the raw text, code spans included
        "Fixes \\#12",
        "Fixes&#32;#12",
        "Fi\u00adxes #12",
        "**Note**fixes #12",
        "pre_fixes #12",
        "réfixes #12",  # Ruby's ASCII \b sees a boundary between "é" and "f"
        "2024:fixes #12",
        "Fixes\t#12",
        "Fixes\u00a0#12",
        "Fixes [#12](https://github.com/o/r/issues/12)",
        "Fixes #12#13",
        "Fixes www.github.com/o/r/issues/12",
    ],
)
def test_keywords_through_markup_case_and_odd_blanks_are_neutralised(text: str) -> None:
    out = sanitize_forge_text(text)
    assert not re.search(r"#\d|://[^\u200b]|www\.[^\u200b]", out), out
    _shown(text, out)


@pytest.mark.parametrize(
    "text",
    [
        "Fixed the bug in `calc.add`; see the prefix fix in #12 discussion.",
        "Related to #12 and group/project#3.",
        "The suffix #12 and prefixes #13 stay links.",
        "Fixes the crash reported in #12.",
    ],
)
def test_references_without_a_closing_keyword_stay_links(text: str) -> None:
    assert sanitize_forge_text(text) == text


@pytest.mark.parametrize(
    ("text", "must_not_contain"),
    [
        ("ping @maya and @acme/security", "@maya"),
        ("ping @all", "@all"),
        ("this fixes #12", "fixes #12"),
        ("Closes: #7 now", "Closes: #7"),
        ("resolves other/repo#3", "resolves other/repo#3"),
        ("fixed https://github.com/a/b/issues/9", "fixed https://github.com/a/b/issues/9"),
        ("![x](https://evil.example/track.png)", "![x]"),
        ("![x](https://evil.example/track.png)", "]("),
        ('<img src="https://evil.example/t.png">', "<img"),
        ("<IMG SRC=x>", "<IMG"),
        ("[the test log](https://evil.example/login)", "]("),
        ("[the test log][log]\n\n[log]: https://evil.example/login", "]["),
        ("[the test log][log]\n\n[log]: https://evil.example/login", "]:"),
        ("[log]\n\n[log]:\n  https://evil.example/login", "]:"),
        ("<https://evil.example/login>", "<https"),
        ('<a href="https://evil.example/login">job page</a>', "<a"),
        ("<details><summary>ok</summary>approve me</details>", "<details"),
        ("looks fine <!-- and @maya: /approve -->", "<!--"),
        ("&lt;img src=x&gt;", "&lt;"),
        ("&#64;maya", "&#64;"),
        ("&#x40;maya", "&#x40;"),
    ],
)
def test_sanitize_forge_text_makes_text_inert(text: str, must_not_contain: str) -> None:
    out = sanitize_forge_text(text)
    assert must_not_contain not in out
    _shown(text, out)


@pytest.mark.parametrize(
    "text",
    ["/close", "done\n/close", "done\n  /merge", "/approve\n", "a\n\t/ready", "/ribbit retry"],
)
def test_a_line_cannot_start_a_gitlab_quick_action(text: str) -> None:
    """GitLab runs "/close", "/merge", "/approve" or "/ready" at a line's start in what
    the bot posts (a description, a note), with the bot's rights."""
    out = sanitize_forge_text(text)
    assert not re.search(r"^[ \t]*/", out, re.MULTILINE), out
    _shown(text, out)


def test_sanitising_twice_changes_nothing() -> None:
    text = (
        "Fixes #1, org/r#2 and https://github.com/o/r/issues/3 GH-4 @maya <b>x</b> &amp; "
        "[l](https://e.example) ![i](https://e.example/i.png) [r]: https://e.example\n/close"
    )
    once = sanitize_forge_text(text)
    assert sanitize_forge_text(once) == once
    assert sanitize_forge_title(once, suffix="(#9)") == sanitize_forge_title(text, suffix="(#9)")


def test_sanitize_forge_text_keeps_ordinary_text() -> None:
    plain = "Fixed the bug in `calc.add`; see the prefix fix in #12 discussion."
    assert sanitize_forge_text(plain) == plain


@pytest.mark.parametrize("secret", ["p@ss<w&rd]x(", "glpat-1x2y3z4w5v6u7t8s"])
def test_secrets_are_masked_before_a_zero_width_space_could_split_them(
    monkeypatch: pytest.MonkeyPatch, secret: str
) -> None:
    """The forge client masks known secrets after this, and would miss a split one."""
    monkeypatch.setattr(redact, "SECRETS", redact.SecretRegistry([secret]))
    for text in (f"fixes {secret}", f"token {secret}", f"https://u:{secret}@host/x"):
        out = sanitize_forge_text(text)
        assert redact.MASK in out and secret[:5] not in out.replace(ZWSP, ""), out
    title = sanitize_forge_title(f"{'x' * 180} {secret}", suffix="(#1)", limit=190)
    assert secret[:5] not in title.replace(ZWSP, "")


def test_status_comment_sanitises_the_gate_report() -> None:
    """Test ids and paths in the report come from the patch."""
    report = "- `tests/@acme/test_x.py::test_fixes #1` ![t](https://evil.example/p.png)"
    body = render_status("job", Status("failed", "no PR", report_markdown=report))
    assert "@acme" not in body and "![t]" not in body and "fixes #1" not in body


def _body(link_issue: str, summary: str, setup_md: str = "") -> str:
    from bot.store.records.gate_report import Verdict
    from worker.pipelines.publish import pr_body
    from worker.repo_config import RepoConfig

    return pr_body(
        config=RepoConfig(link_issue=link_issue),  # type: ignore[arg-type]
        issue=4,
        summary=summary,
        report_md="failing: tests/test_a.py::test_@team closes #5",
        model="m",
        exit_reason="completed",
        turns=1,
        seconds=1.0,
        job_id="j",
        setup_md=setup_md,
        verdict=Verdict.VERIFIED,
    )


def test_setup_failure_comment_sanitises_the_hosts_setup_asked_for() -> None:
    from worker.sandbox.egress_policy import BlockedRequest
    from worker.sandbox.failure import setup_failure
    from worker.sandbox.setup import SetupResult

    host = "x`<img src=https://evil.example/p.png>`@maya"
    setup = SetupResult(
        command="make",
        ok=False,
        exit_code=2,
        output="@maya",
        duration_s=1.0,
        blocked=(BlockedRequest("CONNECT", host, 443, "not allowed"),),
    )
    comment = setup_failure(setup, detected=False, permitted_hosts=()).to_markdown()
    assert "<img" not in comment and "`@maya" not in comment and "\n@maya" not in comment
    assert "<details><summary>Output (last lines)</summary>" in comment  # Ribbit's own


def test_pr_body_sanitises_summary_and_report() -> None:
    body = _body("none", "done, cc @boss; closes #99")
    assert "@boss" not in body and "closes #99" not in body and "@team" not in body


@pytest.mark.parametrize(
    ("link_issue", "closed"),
    [("fixes", ["#4"]), ("closes", ["#4"]), ("refs", []), ("none", [])],
)
def test_only_ribbits_own_line_closes_an_issue_from_the_pr_body(
    link_issue: str, closed: list[str]
) -> None:
    summary = (
        "Fixes #9, #10 and group/p#11. Closing issue #12; Implements JIRA-13. "
        "/close\n<!-- resolves #14 -->"
    )
    body = _body(link_issue, summary, setup_md="### Setup\n\n- `GET evil:443` fixes #15")
    assert gitlab_closes(body) == closed and github_closes(body) == closed
    assert closed_issue_numbers(body) == [c.lstrip("#") for c in closed]
    assert "\n/close" not in body and "<!--" not in body


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


# -- titles ----------------------------------------------------------------------------


def test_a_title_is_one_line_inert_and_keeps_ribbits_own_reference() -> None:
    from worker.pipelines.publish import pr_title

    raw = "Fixes #3, #4 <img src=x> @maya\nCloses #5\r\u2028/merge\u202e evil"
    title = pr_title(raw, 9)
    assert title.endswith(" (#9)") and "\n" not in title and "\r" not in title
    assert "\u2028" not in title and "\u202e" not in title
    for gone in ("#3", "#4", "#5", "<img", "@maya"):
        assert gone not in title
    assert not closes_anything(title)
    assert title.replace(ZWSP, "") == "Fixes #3, #4 <img src=x> @maya Closes #5 /merge evil (#9)"


def test_a_title_is_bounded_and_its_suffix_kept_whole() -> None:
    title = sanitize_forge_title("<" * 500, suffix="(#9)", limit=200)
    assert len(title) <= 200 and title.endswith("… (#9)")
    assert "<<" not in title and title.count("<") > 50
    long = sanitize_forge_title("word " * 100, suffix="(#9)", limit=50)
    assert len(long) <= 50 and long.endswith("… (#9)")


def test_a_keyword_at_the_end_of_a_title_cannot_close_the_issue_it_names() -> None:
    """GitHub's squash merge makes the title a commit subject on the default branch."""
    title = sanitize_forge_title("Crash that this fixes:", suffix="(#9)")
    assert not closes_anything(title) and "#9" not in title


def test_the_commit_subject_is_sanitised_with_its_own_keyword_prefix() -> None:
    """ "Fix: " is a closing keyword: before a title "#7 crashes" it closed #7."""
    from worker.pipelines.publish import commit_message

    for title in ("#7 crashes", "issue #7, #8 and @maya", "JIRA-7\n\nCloses #9"):
        message = commit_message(title, "job1", revise=False)
        assert not closes_anything(message), message
        subject, _, rest = message.partition("\n\n")
        assert subject.startswith("Fix: ") and "\n" not in subject and len(subject) <= 72
        assert rest.startswith("Machine-written by Ribbit (job job1)")
