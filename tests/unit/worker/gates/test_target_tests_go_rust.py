"""Target tests in Go and Rust: the test function around a line the patch adds, and
which reported case is that test (go test's package ids, libtest's binary and path)."""

from __future__ import annotations

import pytest

from worker.gates.junit import TestCase
from worker.gates.targets import (
    TargetTest,
    _enclosing_go_test,
    _enclosing_rust_test,
    _matches,
)

GO = """\
package humanize

import "testing"

func helper() int {
\treturn 1
}

func TestBigComma(t *testing.T) {
\tif BigComma(nil) != "" {
\t\tt.Fail()
\t}
}

// TestNotATest is a comment.
func Testing(t *testing.T) {
\tt.Log("not a test: Go wants TestX")
}

func FuzzComma(f *testing.F) {
\tf.Add(1)
}
"""

RUST = """\
pub fn jaro(a: &str, b: &str) -> f64 {
    0.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn helper() -> f64 {
        jaro("a", "a")
    }

    #[test]
    fn jaro_same_one_character() {
        assert_eq!(1.0, jaro("a", "a"));
    }

    #[test]
    #[should_panic]
    // a comment between the attributes
    fn panics() {
        panic!();
    }
}
"""


def _line(text: str, needle: str) -> int:
    [n] = [i for i, line in enumerate(text.splitlines(), 1) if needle in line]
    return n


@pytest.mark.parametrize(
    ("needle", "expected"),
    [
        ('if BigComma(nil) != ""', "TestBigComma"),
        ("func TestBigComma", "TestBigComma"),
        ("\treturn 1", None),  # a helper is no test
        ('t.Log("not a test', None),  # Testing is not TestX
        ("f.Add(1)", "FuzzComma"),
        ("// TestNotATest", None),
        ("package humanize", None),
    ],
)
def test_go_enclosing_test(needle: str, expected: str | None) -> None:
    assert _enclosing_go_test(GO.splitlines(), _line(GO, needle)) == expected


def test_go_a_line_after_a_function_is_in_none() -> None:
    lines = GO.splitlines()
    blank_after = _line(GO, "// TestNotATest") - 1
    assert lines[blank_after - 1] == ""
    assert _enclosing_go_test(lines, blank_after) is None


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ('assert_eq!(1.0, jaro("a", "a"));', "jaro_same_one_character"),
        ("fn jaro_same_one_character() {", "jaro_same_one_character"),
        ("panic!();", "panics"),  # #[test] above other attributes and a comment
        ("#[should_panic]", "panics"),  # an attribute added to a test
        ("#[cfg(test)]", None),  # on a module, not a test fn
        ("0.0", None),  # the code under test
        ('jaro("a", "a")', None),  # a helper in the tests module
    ],
)
def test_rust_enclosing_test(line: str, expected: str | None) -> None:
    lines = RUST.splitlines()
    [line_no] = [i for i, text in enumerate(lines, 1) if text.strip() == line]
    assert _enclosing_rust_test(lines, line_no) == expected


def test_rust_an_added_test_attribute_names_the_function_below() -> None:
    lines = RUST.splitlines()
    first_test = next(i for i, line in enumerate(lines, 1) if line.strip() == "#[test]")
    assert _enclosing_rust_test(lines, first_test) == "jaro_same_one_character"


def _case(classname: str, name: str) -> TestCase:
    return TestCase(f"{classname}::{name}", name, classname, "passed")


@pytest.mark.parametrize(
    ("case", "target", "expected"),
    [
        (_case("github.com/d/h", "TestX"), TargetTest("TestX", "x_test.go"), True),
        (_case("github.com/d/h", "TestX/sub"), TargetTest("TestX", "x_test.go"), True),
        (_case("github.com/d/h", "TestXY"), TargetTest("TestX", "x_test.go"), False),
        (_case("github.com/d/h/english", "TestX"), TargetTest("TestX", "english/w_test.go"), True),
        (_case("github.com/d/h", "TestX"), TargetTest("TestX", "english/w_test.go"), False),
        (_case("src/lib.rs", "tests::t"), TargetTest("t", "src/lib.rs"), True),
        (_case("src/lib.rs", "bytes::t"), TargetTest("t", "src/bytes.rs"), True),
        (_case("src/lib.rs", "tests::t2"), TargetTest("t", "src/lib.rs"), False),
        (_case("tests/cli.rs", "t"), TargetTest("t", "tests/cli.rs"), True),
        (_case("tests/other.rs", "t"), TargetTest("t", "tests/cli.rs"), False),
        (_case("tests/cli.rs", "t"), TargetTest("t", "tests/common/mod.rs"), True),
        (_case("src/lib.rs", "bytes::test_quote"), TargetTest("test_quote", None), True),
        (_case("doc:strsim", "src/lib.rs - t (line 3)"), TargetTest("t", "src/lib.rs"), False),
        # A workspace: each member's binaries are named under its folder (junit.py).
        (_case("app/tests/it.rs", "t"), TargetTest("t", "app/tests/it.rs"), True),
        (_case("tests/it.rs", "t"), TargetTest("t", "app/tests/it.rs"), False),
        (_case("lib/tests/it.rs", "t"), TargetTest("t", "app/tests/it.rs"), False),
        (_case("app/tests/it.rs", "t"), TargetTest("t", "app/tests/common/mod.rs"), True),
        (
            _case("crates/calc/src/lib.rs", "tests::t"),
            TargetTest("t", "crates/calc/src/a.rs"),
            True,
        ),
        (
            _case("crates/app/src/lib.rs", "tests::t"),
            TargetTest("t", "crates/calc/src/a.rs"),
            False,
        ),
        (_case("crates/calc/tests/x.rs", "t"), TargetTest("t", "crates/calc/src/a.rs"), False),
    ],
)
def test_which_case_is_the_target(case: TestCase, target: TargetTest, expected: bool) -> None:
    assert _matches(case, target) is expected
