"""What counts as a change to test discovery or runner configuration: whole runner
files always, shared files (setup.cfg, tox.ini, pyproject.toml, package.json,
Makefile) only when their test sections change."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from tests.unit.worker.gates.helpers import make_ctx, make_patch, repo_with
from worker.gates.discovery import changed_paths, discovery_changes
from worker.gates.trees import patch_trees

BASE = {
    "setup.cfg": "[metadata]\nname = calc\n\n[tool:pytest]\ntestpaths = tests\n",
    "pyproject.toml": '[project]\nname = "calc"\ndependencies = []\n',
    "package.json": '{"name": "calc", "scripts": {"test": "jest", "build": "tsc"}}\n',
    "Makefile": "build:\n\tcc -o x x.c\n\ntest:\n\tpytest -q\n",
    "calc.py": "x = 1\n",
    "Cargo.toml": '[package]\nname = "calc"\n\n[dependencies]\n',
    "src/lib.rs": "#[test]\nfn adds() {}\n",
    "calc_test.go": "package calc\n\nfunc TestAdd(t *testing.T) {}\n",
    "test/calc.test.js": "test('adds', () => {});\n",
}


def _changes(tmp_path: Path, changes: dict[str, str | bytes | None]) -> set[str]:
    repo, base = repo_with(tmp_path, BASE)
    ctx = make_ctx(repo, base, make_patch(repo, changes))
    with patch_trees(ctx) as trees:
        found = discovery_changes(
            trees.before, trees.after, changed_paths(trees.before, trees.after)
        )
    return {c.path for c in found}


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"conftest.py": "import pytest\n"}, {"conftest.py"}),
        ({"tests/conftest.py": "x = 1\n"}, {"tests/conftest.py"}),
        ({"pytest.ini": "[pytest]\n"}, {"pytest.ini"}),
        ({"sitecustomize.py": "import os\n"}, {"sitecustomize.py"}),
        ({"evil.pth": "import os\n"}, {"evil.pth"}),
        ({"jest.config.js": "module.exports = {}\n"}, {"jest.config.js"}),
        ({"setup.cfg": BASE["setup.cfg"].replace("tests", "nothing")}, {"setup.cfg"}),
        ({"setup.cfg": BASE["setup.cfg"].replace("calc", "calc2")}, set()),
        (
            {
                "pyproject.toml": BASE["pyproject.toml"]
                + "[tool.pytest.ini_options]\naddopts = '-x'\n"
            },
            {"pyproject.toml"},
        ),
        ({"pyproject.toml": BASE["pyproject.toml"].replace("[]", '["attrs"]')}, set()),
        ({"package.json": BASE["package.json"].replace('"jest"', '"true"')}, {"package.json"}),
        ({"package.json": BASE["package.json"].replace("tsc", "tsc -p .")}, set()),
        ({"Makefile": BASE["Makefile"].replace("pytest -q", "true")}, {"Makefile"}),
        ({"Makefile": BASE["Makefile"].replace("cc -o", "gcc -o")}, set()),
        ({"calc.py": "x = 2\n"}, set()),
        # Go: build constraints, testing.Short guards and TestMain in test files.
        ({"calc_test.go": "//go:build never\n\n" + BASE["calc_test.go"]}, {"calc_test.go"}),
        ({"calc_test.go": "// +build never\n\n" + BASE["calc_test.go"]}, {"calc_test.go"}),
        (
            {"calc_test.go": BASE["calc_test.go"].replace("{}", "{ if testing.Short() {} }")},
            {"calc_test.go"},
        ),
        ({"main_test.go": "package calc\n\nfunc TestMain(m *testing.M) {}\n"}, {"main_test.go"}),
        ({"new_test.go": "//go:build linux\n\npackage calc\n"}, set()),  # only new tests
        ({"calc_test.go": BASE["calc_test.go"] + "\nfunc TestSub(t *testing.T) {}\n"}, set()),
        # Rust: cargo's test targets and config, #[ignore] and cfg tricks.
        ({"Cargo.toml": BASE["Cargo.toml"] + "\n[lib]\ntest = false\n"}, {"Cargo.toml"}),
        (
            {"Cargo.toml": BASE["Cargo.toml"] + '\n[[test]]\nname = "t"\nharness = false\n'},
            {"Cargo.toml"},
        ),
        (
            {"Cargo.toml": BASE["Cargo.toml"].replace("calc", "calc\nautotests = false")},
            {"Cargo.toml"},
        ),
        ({"Cargo.toml": BASE["Cargo.toml"] + 'itoa = "1"\n'}, set()),
        (
            {".cargo/config.toml": "[target.x86_64-unknown-linux-gnu]\nrunner = 'true'\n"},
            {".cargo/config.toml"},
        ),
        ({"src/lib.rs": "#[test]\n#[ignore]\nfn adds() {}\n"}, {"src/lib.rs"}),
        ({"src/lib.rs": "#[test]\n#[cfg_attr(unix, ignore)]\nfn adds() {}\n"}, {"src/lib.rs"}),
        ({"src/lib.rs": "#[cfg(any())]\n#[test]\nfn adds() {}\n"}, {"src/lib.rs"}),
        ({"src/lib.rs": "#[test]\nfn adds() { assert!(true) }\n"}, set()),
        # JavaScript: runner config files and markers that skip or focus tests.
        ({"vite.config.ts": "export default { test: { exclude: ['**'] } }\n"}, {"vite.config.ts"}),
        ({"vitest.config.mjs": "export default {}\n"}, {"vitest.config.mjs"}),
        ({"test/calc.test.js": "test.skip('adds', () => {});\n"}, {"test/calc.test.js"}),
        ({"test/calc.test.js": "xit('adds', () => {});\n"}, {"test/calc.test.js"}),
        ({"test/calc.test.js": "test('adds', { skip: true }, () => {});\n"}, {"test/calc.test.js"}),
        (
            {"test/calc.test.js": "describe.only('x', () => {});\n" + BASE["test/calc.test.js"]},
            {"test/calc.test.js"},
        ),
        ({"test/calc.test.js": BASE["test/calc.test.js"] + "test('subs', () => {});\n"}, set()),
        (
            {
                "package.json": BASE["package.json"].replace(
                    "}}", '}, "jest": {"testPathIgnorePatterns": ["/"]}}'
                )
            },
            {"package.json"},
        ),
        ({"test.mk": "test:\n\tgo test -run XXX ./...\n"}, {"test.mk"}),
    ],
)
def test_discovery_changes(
    tmp_path: Path, changes: dict[str, str | bytes | None], expected: set[str]
) -> None:
    assert _changes(tmp_path, changes) == expected


def test_toml_readers_keep_their_names_and_take_the_files_text() -> None:
    """What `_toml_reader` makes is named and documented as its picker, and says it
    takes what callers pass: the file's text (or None), not the parsed table."""
    from worker.gates.discovery import _cargo_manifest, _pyproject

    assert (_pyproject.__name__, _cargo_manifest.__name__) == ("_pyproject", "_cargo_manifest")
    assert (_cargo_manifest.__doc__ or "").startswith("What decides which test targets")
    for reader in (_pyproject, _cargo_manifest):
        [param] = inspect.signature(reader).parameters.values()
        assert (param.name, param.annotation) == ("text", "str | None")
    assert _pyproject(None) is None and _pyproject("[tool") == ("unreadable", "[tool")
    assert _pyproject('[tool.pytest.ini_options]\naddopts = "-q"\n')["pytest"] == {
        "ini_options": {"addopts": "-q"}
    }
