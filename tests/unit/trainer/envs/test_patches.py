"""trainer/envs/patches.py: a fix's diff split by file into its code and its tests, as
the environment builder stores them (``patch`` / ``test_patch``) and grading resets them."""

from __future__ import annotations

import pytest

from trainer.envs.patches import FilePatch, is_test_path, split_by_file, split_test_patch


def _section(path: str, added: str = "x = 1", old: str | None = None) -> str:
    return (
        f"diff --git a/{old or path} b/{path}\n"
        "index 1111111..2222222 100644\n"
        f"--- a/{old or path}\n"
        f"+++ b/{path}\n"
        "@@ -1 +1,2 @@\n"
        " keep\n"
        f"+{added}\n"
    )


CODE = _section("src/calc.py", "return a + b")
TESTS = _section("tests/test_calc.py", "assert add(2, 3) == 5")
MORE_CODE = _section("src/util.py", "def helper(): ...")


def test_patches_split_by_file_keeps_each_section_whole_and_in_order() -> None:
    diff = CODE + TESTS + MORE_CODE
    sections = split_by_file(diff)
    assert [s.path for s in sections] == ["src/calc.py", "tests/test_calc.py", "src/util.py"]
    assert [s.text for s in sections] == [CODE, TESTS, MORE_CODE]
    assert "".join(s.text for s in sections) == diff  # nothing lost, nothing added


def test_patches_split_by_file_of_nothing() -> None:
    assert split_by_file("") == []
    # Text before the first header (a mail's preamble) belongs to no file.
    assert split_by_file("Subject: fix\n\n" + CODE) == [FilePatch("src/calc.py", CODE)]


def test_patches_a_renamed_file_goes_by_its_new_path() -> None:
    [section] = split_by_file(_section("tests/test_new.py", old="tests/test_old.py"))
    assert section.path == "tests/test_new.py"


def test_patches_added_lines_leave_out_headers_and_context() -> None:
    text = _section("a.py") + "-removed\n+second\n"
    assert split_by_file(text)[0].added_lines == ["x = 1", "second"]


def test_patches_an_added_line_that_starts_with_plus_signs_is_kept() -> None:
    # "++i;" added reads "+++i;" in the diff; only the header before the hunks is left out.
    text = _section("loop.c", "++i;") + "@@ -9 +10,2 @@\n+++ b/not-a-header\n"
    assert split_by_file(text)[0].added_lines == ["++i;", "++ b/not-a-header"]


@pytest.mark.parametrize(
    "path",
    [
        "tests/test_calc.py",
        "test/helpers.py",  # any file in a test folder
        "pkg/testing/fixtures.py",
        "src/pkg/tests/data/input.json",
        "test_calc.py",
        "pkg/calc_test.py",
        "pkg/calc_tests.py",
        "pkg/conftest.py",
    ],
)
def test_patches_test_paths(path: str) -> None:
    assert is_test_path(path)


@pytest.mark.parametrize(
    "path",
    [
        "src/calc.py",
        "tests.py",  # a module named tests, not a test folder
        "src/test",  # a file named like a folder
        "latest/calc.py",
        "contest.py",
        "testsuite/calc.py",
        "src/attestation.py",
        "pkg/tests_helper.py",
    ],
)
def test_patches_code_paths(path: str) -> None:
    assert not is_test_path(path)


def test_patches_split_test_patch_puts_each_file_on_its_side() -> None:
    code, tests = split_test_patch(CODE + TESTS + MORE_CODE)
    assert code == CODE + MORE_CODE
    assert tests == TESTS
    assert split_test_patch(TESTS) == ("", TESTS)
    assert split_test_patch("") == ("", "")


# As git writes them: a name with a space is left unquoted (its "+++" line ends in a tab),
# a non-ASCII one is C-quoted with octal escapes.
SPACED = (
    "diff --git a/docs/my file.py b/docs/my file.py\nnew file mode 100644\n"
    "--- /dev/null\n+++ b/docs/my file.py\t\n@@ -0,0 +1 @@\n+a\n"
)
QUOTED = (
    'diff --git "a/t\\303\\251st.py" "b/t\\303\\251st.py"\nnew file mode 100644\n'
    '--- /dev/null\n+++ "b/t\\303\\251st.py"\n@@ -0,0 +1 @@\n+b\n'
)


def test_patches_a_name_with_a_space_is_its_own_section() -> None:
    # It used to be dropped when first, and glued onto the file before it otherwise: a
    # code change behind a test file then went into the test patch.
    assert split_by_file(SPACED) == [FilePatch("docs/my file.py", SPACED)]
    code, tests = split_test_patch(TESTS + SPACED)
    assert (code, tests) == (SPACED, TESTS)


def test_patches_a_quoted_name_is_its_own_section_with_its_real_path() -> None:
    assert split_by_file(TESTS + QUOTED) == [
        FilePatch("tests/test_calc.py", TESTS),
        FilePatch("tést.py", QUOTED),
    ]
    assert split_test_patch(TESTS + QUOTED) == (QUOTED, TESTS)
    [escaped] = split_by_file('diff --git "a/say \\"hi\\".py" "b/say \\"hi\\"\\t.py"\n')
    assert escaped.path == 'say "hi"\t.py'


def test_patches_a_renamed_name_with_spaces_goes_by_its_new_path() -> None:
    [section] = split_by_file("diff --git a/old name.py b/new name.py\nrename from x\n")
    assert section.path == "new name.py"
    # Unrenamed, both halves are the same name: " b/" inside it is no boundary.
    [same] = split_by_file("diff --git a/x b/y.py b/x b/y.py\n")
    assert same.path == "x b/y.py"
