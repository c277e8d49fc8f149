from __future__ import annotations

import pytest

from worker.gates.patch import normalize_repo_path, parse_patch, unquote_git_path

RENAME_AND_DELETE = """\
diff --git a/old/name.py b/new/name.py
similarity index 90%
rename from old/name.py
rename to new/name.py
index 1111111..2222222 100644
--- a/old/name.py
+++ b/new/name.py
@@ -1,3 +1,3 @@
 x = 1
--- this removed line looks like a header
+y = 2
 z = 3
diff --git a/gone.txt b/gone.txt
deleted file mode 100644
index 3333333..0000000
--- a/gone.txt
+++ /dev/null
@@ -1,2 +0,0 @@
-first
-second
diff --git a/logo.png b/logo.png
new file mode 100644
index 0000000..4444444
Binary files /dev/null and b/logo.png differ
"""


def test_parse_patch_reads_renames_deletions_and_binaries() -> None:
    parsed = parse_patch(RENAME_AND_DELETE)
    rename, deletion, binary = parsed.files
    assert rename.status == "renamed"
    assert (rename.old and rename.old.path, rename.new and rename.new.path) == (
        "old/name.py",
        "new/name.py",
    )
    assert rename.removed == ((2, "-- this removed line looks like a header"),)
    assert rename.added == ((2, "y = 2"),)
    assert deletion.status == "deleted" and deletion.new is None
    assert [t for _, t in deletion.removed] == ["first", "second"]
    assert binary.binary and binary.status == "added" and binary.path == "logo.png"
    assert parsed.changed_lines == 4


def test_parse_patch_sees_through_dot_dot_paths() -> None:
    patch = (
        "diff --git a/a/../.github/workflows/ci.yml b/a/../.github/workflows/ci.yml\n"
        "new file mode 100644\n--- /dev/null\n+++ b/a/../.github/workflows/ci.yml\n"
        "@@ -0,0 +1 @@\n+on: push\n"
    )
    (change,) = parse_patch(patch).files
    assert change.new is not None
    assert change.new.path == ".github/workflows/ci.yml"
    assert change.new.raw == "a/../.github/workflows/ci.yml"
    assert not change.new.escapes


@pytest.mark.parametrize(
    "raw", ["../outside.py", "/etc/passwd", "a/../../x", ".git/config", "sub/.GIT/hooks/pre-commit"]
)
def test_normalize_repo_path_flags_escapes(raw: str) -> None:
    assert normalize_repo_path(raw).escapes


def test_unquote_git_path_decodes_octal_utf8() -> None:
    assert unquote_git_path('"a/caf\\303\\251 \\"x\\".py"') == 'a/café "x".py'


def test_parse_patch_reads_plain_unified_diff_and_quoted_names() -> None:
    patch = (
        "--- a/one.py\t2024-01-01\n+++ b/one.py\t2024-01-02\n@@ -1 +1 @@\n-a\n+b\n"
        'diff --git "a/sp ace.py" "b/sp ace.py"\nindex 1..2 100644\n'
        '--- "a/sp ace.py"\n+++ "b/sp ace.py"\n@@ -1 +1,2 @@\n x\n+y\n'
        "\\ No newline at end of file\n"
    )
    first, second = parse_patch(patch).files
    assert first.path == "one.py" and first.status == "modified"
    assert second.path == "sp ace.py" and second.added == ((2, "y"),)


def test_parse_patch_reads_symlink_and_mode_changes() -> None:
    patch = (
        "diff --git a/link b/link\nnew file mode 120000\nindex 0000000..1234567\n"
        "--- /dev/null\n+++ b/link\n@@ -0,0 +1 @@\n+/etc/passwd\n"
        "\\ No newline at end of file\n"
        "diff --git a/run.sh b/run.sh\nold mode 100644\nnew mode 100755\n"
    )
    link, script = parse_patch(patch).files
    assert link.is_symlink
    assert (script.old_mode, script.new_mode) == ("100644", "100755")
