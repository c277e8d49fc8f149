"""The pinned run's reading (issue #38) in every language the target finder knows: a
base test the patched code fails, in a test the patch edits, is a behaviour change with
its old and new lines; one it leaves alone is a regression. Hand-built runs with each
runner's real test ids (go test via gotestsum, libtest, jest), real patch trees."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.worker.gates.helpers import make_ctx, make_patch, repo_with
from worker.gates.judge import SuiteRun
from worker.gates.junit import Outcome, TestCase
from worker.gates.pinned import answered, pinned_changes
from worker.gates.targets import target_tests
from worker.gates.trees import patch_trees

GO_TEST = (
    'package calc\n\nimport "testing"\n\n'
    'func TestAdd(t *testing.T) {\n\tif Add(2, 2) != 4 {\n\t\tt.Fatal("add")\n\t}\n}\n\n'
    'func TestMul(t *testing.T) {\n\tif Mul(2, 3) != 6 {\n\t\tt.Fatal("mul")\n\t}\n}\n'
)
RUST_LIB = (
    "pub fn add(a: i32, b: i32) -> i32 { a + b }\n\n"
    "#[cfg(test)]\nmod tests {\n    use super::*;\n\n"
    "    #[test]\n    fn adds() {\n        assert_eq!(add(2, 2), 4);\n    }\n\n"
    "    #[test]\n    fn adds_zero() {\n        assert_eq!(add(0, 0), 0);\n    }\n}\n"
)
JS_TEST = (
    "const { add } = require('../calc');\n\n"
    "describe('add', () => {\n  it('adds two numbers', () => {\n"
    "    expect(add(2, 2)).toBe(4);\n  });\n\n"
    "  it('adds zero', () => {\n    expect(add(0, 0)).toBe(0);\n  });\n});\n"
)
# language: (base files, the edited test file and its new text, the moved test's case
# and the untouched one's (id, name, classname), the moved lines)
CASES = {
    "go": (
        {"go.mod": "module example.com/calc\n", "calc_test.go": GO_TEST},
        ("calc_test.go", GO_TEST.replace("Add(2, 2) != 4", "Add(2, 2) != 5")),
        ("example.com/calc::TestAdd", "TestAdd", "example.com/calc"),
        ("example.com/calc::TestMul", "TestMul", "example.com/calc"),
        (["if Add(2, 2) != 4 {"], ["if Add(2, 2) != 5 {"]),
    ),
    "rust": (
        {"Cargo.toml": '[package]\nname = "calc"\n', "src/lib.rs": RUST_LIB},
        ("src/lib.rs", RUST_LIB.replace("add(2, 2), 4", "add(2, 2), 5")),
        ("src/lib.rs::tests::adds", "tests::adds", "src/lib.rs"),
        ("src/lib.rs::tests::adds_zero", "tests::adds_zero", "src/lib.rs"),
        (["assert_eq!(add(2, 2), 4);"], ["assert_eq!(add(2, 2), 5);"]),
    ),
    "jest": (
        {"package.json": "{}\n", "calc.js": "", "test/calc.test.js": JS_TEST},
        ("test/calc.test.js", JS_TEST.replace("toBe(4)", "toBe(5)")),
        ("test/calc.test.js::add adds two numbers", "add adds two numbers", "test/calc.test.js"),
        ("test/calc.test.js::add adds zero", "add adds zero", "test/calc.test.js"),
        (["expect(add(2, 2)).toBe(4);"], ["expect(add(2, 2)).toBe(5);"]),
    ),
}


def _run(label: str, cases: list[tuple[str, str, str]], outcomes: list[Outcome]) -> SuiteRun:
    made = {i: TestCase(i, name, cls, o) for (i, name, cls), o in zip(cases, outcomes, strict=True)}
    final = {i: c.outcome for i, c in made.items()}
    return SuiteRun(label, exit_code=1, first_exit_code=1, junit=True, final=final, cases=made)


@pytest.mark.parametrize("language", list(CASES))
def test_a_moved_assertion_is_shown_in_every_language(tmp_path: Path, language: str) -> None:
    files, (path, edited), moved, untouched, (old, new) = CASES[language]
    repo, base = repo_with(tmp_path, files)
    ctx = make_ctx(repo, base, make_patch(repo, {path: edited}))
    with patch_trees(ctx) as trees:
        targets = target_tests(ctx, trees)
        before = _run("before", [moved, untouched], ["passed", "passed"])
        # The base's test file against the patched code: both fail there.
        pinned = _run("pinned", [moved, untouched], ["failed", "failed"])
        changes = pinned_changes(before, pinned, targets)
        assert list(changes.edited) == [moved[0]]
        assert changes.regressions == [untouched[0]]  # not edited: a regression
        assert changes.to_dict(trees)["behaviour_changes"] == [
            {"test": moved[0], "old": old, "new": new}
        ]
        assert answered(pinned, changes) == {moved[0]}


def test_no_pinned_run_answers_for_nothing() -> None:
    before = _run("before", [("t.py::test_a", "test_a", "t")], ["passed"])
    changes = pinned_changes(before, None, [])
    assert changes.edited == {} and changes.regressions == []
    assert answered(None, changes) == frozenset()
    timed_out = SuiteRun("pinned", timed_out=True, junit=True, final={"t.py::test_a": "passed"})
    assert answered(timed_out, changes) == frozenset()
