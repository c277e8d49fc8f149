"""The patch's Rust unit tests against the old code (worker/gates/rusttests.py): only the
changes wholly inside test code come along; code the patch changes stays the base's."""

from __future__ import annotations

from worker.gates.rusttests import only_test_changes, rust_test_lines

BASE = """pub fn jaro(a: &str, b: &str) -> f64 {
    if a.is_empty() { return 0.0; }
    0.5
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jaro_both_empty() {
        assert_eq!(1.0, jaro("", ""));
    }
}
"""
# The fix changes the code and adds a test; the test's string holds a brace.
PATCHED = BASE.replace(
    "    if a.is_empty() { return 0.0; }\n", "    if a == b { return 1.0; }\n"
).replace(
    '        assert_eq!(1.0, jaro("", ""));\n    }\n',
    '        assert_eq!(1.0, jaro("", ""));\n    }\n\n'
    "    #[test]\n    fn jaro_same_one_character() {\n"
    '        assert_eq!(1.0, jaro("{", "{"));\n    }\n',
)


def test_the_test_module_is_a_region_and_the_code_is_not() -> None:
    lines = BASE.splitlines()
    regions = rust_test_lines(lines)
    assert min(regions) == lines.index("#[cfg(test)]") and max(regions) == len(lines) - 1
    assert 0 not in regions and 1 not in regions
    # A brace inside a string is no brace.
    assert max(rust_test_lines(PATCHED.splitlines())) == len(PATCHED.splitlines()) - 1


def test_only_the_new_test_comes_along_never_the_fix() -> None:
    old_code = only_test_changes(BASE, PATCHED)
    assert old_code is not None
    assert "fn jaro_same_one_character()" in old_code  # the patch's new test
    assert "if a.is_empty() { return 0.0; }" in old_code  # the base's code
    assert "if a == b" not in old_code


def test_a_patch_that_changes_no_test_code_gives_nothing() -> None:
    code_only = BASE.replace("0.5\n", "0.25\n")
    assert only_test_changes(BASE, code_only) is None


def test_a_standalone_test_function_is_a_region_and_unclosed_braces_are_none() -> None:
    lines = ["fn helper() {}", "", "#[test]", "fn works() {", "    helper();", "}"]
    assert rust_test_lines(lines) == {2, 3, 4, 5}
    assert rust_test_lines(["#[cfg(test)]", "mod tests {", "    fn x() {"]) == set()


# rust-shlex's table of cases, as 1.0.0's fix (6db4704) changed it: a #[cfg(test)] static
# whose type and value hold brackets and parentheses, and quotes inside its strings.
TABLE_BASE = """fn parse_single() {}

#[cfg(test)]
static SPLIT_TEST_ITEMS: &'static [(&'static str, Option<&'static [&'static str]>)] = &[
    ("'baz\\\\\\''", Some(&["baz\\'"])),
    ("foo\\"#bar", None),
];

#[test]
fn test_split() {
    for &(input, output) in SPLIT_TEST_ITEMS {
        assert_eq!(split(input), output);
    }
}
"""
TABLE_PATCHED = TABLE_BASE.replace(
    "fn parse_single() {}", "fn parse_single() { /* no escapes */ }"
).replace(
    """    ("foo\\"#bar", None),\n""",
    """    ("foo\\"#bar", None),\n    ("'\\\\n'", Some(&["\\\\n"])),\n""",
)


def test_a_cfg_test_table_is_a_region_and_its_new_rows_come_along() -> None:
    lines = TABLE_BASE.splitlines()
    table = lines.index("#[cfg(test)]")
    # The table, and the test after it; the blank line between them is neither.
    assert rust_test_lines(lines) == set(range(table, len(lines))) - {lines.index("];") + 1}
    old_code = only_test_changes(TABLE_BASE, TABLE_PATCHED)
    assert old_code is not None
    assert """("'\\\\n'", Some(&["\\\\n"])),""" in old_code  # the patch's new row
    assert "fn parse_single() {}" in old_code  # the base's code


def test_an_item_that_never_ends_is_no_region() -> None:
    assert rust_test_lines(["#[cfg(test)]", "static CASES: &[u8] = &[", "    1,"]) == set()
    # #[test] marks a function only.
    assert rust_test_lines(["#[test]", "static CASES: &[u8] = &[1];"]) == set()
