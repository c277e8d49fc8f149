from __future__ import annotations

from pathlib import Path

import pytest

from bot.store.records.gate_report import GateResult
from tests.unit.worker.gates.helpers import make_ctx, make_patch, repo_with
from worker.gates.hygiene import HygieneGate, path_matches
from worker.gates.secrets import find_secrets
from worker.repo_config import GateRules, PathRules, RepoConfig
from worker.settings import GateSettings

BASE = {
    "app/core.py": "def add(a, b):\n    return a + b\n",
    "tests/test_core.py": (
        "import pytest\n\nfrom app.core import add\n\n\n"
        "def test_add():\n    assert add(1, 2) == 3\n    assert add(0, 0) == 0\n\n\n"
        "def test_float():\n    assert add(0.1, 0.2) == pytest.approx(0.3)\n"
    ),
    "requirements.txt": "flask==3.1.0\n",
    "requirements-lock.txt": "flask==3.1.0 \\\n    --hash=sha256:" + "ab" * 32 + "\n",
    "docs/guide.md": "# Guide\n",
    "secrets/keep.txt": "nothing\n",
}


def _hygiene(
    tmp_path: Path,
    changes: dict[str, str | bytes | None],
    *,
    config: RepoConfig | None = None,
    settings: GateSettings | None = None,
    patch: str | None = None,
) -> GateResult:
    repo, base = repo_with(tmp_path, BASE)
    text = patch if patch is not None else make_patch(repo, changes)
    return HygieneGate().run(make_ctx(repo, base, text, config=config, settings=settings))


def _rules(result: GateResult) -> set[str]:
    return {f.rule for f in result.findings if f.severity == "error"}


def test_hygiene_passes_clean_patch(tmp_path: Path) -> None:
    result = _hygiene(
        tmp_path,
        {
            "app/core.py": 'def add(a, b):\n    """Sum."""\n    return a + b\n',
            "tests/test_core.py": BASE["tests/test_core.py"] + "\n\ndef test_neg():\n"
            "    assert add(-1, 1) == 0\n",
            "requirements.txt": "flask==3.1.0\nrequests==2.32.0\n",
        },
    )
    assert result.passed, result.findings
    assert result.details["paths"] == ["app/core.py", "requirements.txt", "tests/test_core.py"]


@pytest.mark.parametrize(
    ("path", "rule"),
    [
        (".github/workflows/ci.yml", "ci-config"),
        (".gitlab-ci.yml", "ci-config"),
        (".circleci/config.yml", "ci-config"),
        ("Jenkinsfile", "ci-config"),
        ("azure-pipelines.yml", "ci-config"),
        (".travis.yml", "ci-config"),
        (".buildkite/pipeline.yml", "ci-config"),
        (".drone.yml", "ci-config"),
        (".ribbit.yml", "gate-config"),
        (".semgrep.yml", "gate-config"),
        (".semgrepignore", "gate-config"),
        (".devcontainer/Dockerfile", "gate-config"),
        (".devcontainer.json", "gate-config"),
        ("poetry.lock", "lockfile"),
        ("package-lock.json", "lockfile"),
        ("yarn.lock", "lockfile"),
        ("pnpm-lock.yaml", "lockfile"),
        ("Cargo.lock", "lockfile"),
        ("go.sum", "lockfile"),
        ("uv.lock", "lockfile"),
        ("Pipfile.lock", "lockfile"),
    ],
)
def test_hygiene_blocks_protected_files(tmp_path: Path, path: str, rule: str) -> None:
    result = _hygiene(tmp_path, {path: "changed: true\n"})
    assert not result.passed
    assert rule in _rules(result)


def test_hygiene_allows_lockfiles_when_repo_says_so(tmp_path: Path) -> None:
    config = RepoConfig(gates=GateRules(allow_lockfiles=True))
    result = _hygiene(
        tmp_path, {"poetry.lock": "x\n", "requirements-lock.txt": "flask==3.1.1\n"}, config=config
    )
    assert result.passed, result.findings


def test_hygiene_treats_hash_pinned_requirements_as_lockfile(tmp_path: Path) -> None:
    result = _hygiene(tmp_path, {"requirements-lock.txt": "flask==3.1.1\n"})
    assert _rules(result) == {"lockfile"}


def test_hygiene_blocks_dot_dot_path_into_ci(tmp_path: Path) -> None:
    patch = (
        "diff --git a/app/../.github/workflows/x.yml b/app/../.github/workflows/x.yml\n"
        "new file mode 100644\n--- /dev/null\n+++ b/app/../.github/workflows/x.yml\n"
        "@@ -0,0 +1 @@\n+on: push\n"
    )
    result = _hygiene(tmp_path, {}, patch=patch)
    assert {"ci-config", "path-not-normalized"} <= _rules(result)


def test_hygiene_blocks_path_escaping_repo(tmp_path: Path) -> None:
    patch = (
        "diff --git a/../evil.py b/../evil.py\nnew file mode 100644\n--- /dev/null\n"
        "+++ b/../evil.py\n@@ -0,0 +1 @@\n+x = 1\n"
    )
    assert "path-escapes-repo" in _rules(_hygiene(tmp_path, {}, patch=patch))


def test_hygiene_blocks_binary_and_symlink(tmp_path: Path) -> None:
    repo, base = repo_with(tmp_path, BASE)
    (repo / "app").mkdir(exist_ok=True)
    (repo / "app" / "link").symlink_to("/etc/passwd")
    patch = make_patch(repo, {"app/logo.png": b"\x89PNG\r\n\x1a\n\x00\x00binary"})
    result = HygieneGate().run(make_ctx(repo, base, patch))
    assert {"binary-file", "symlink"} <= _rules(result)


@pytest.mark.parametrize(
    ("line", "kind"),
    [
        ('TOKEN = "ghp_' + "a1B2" * 9 + '"', "github-token"),
        ('token = "github_pat_' + "11ABCDEFG0" * 3 + '"', "github-token"),
        ('GITLAB = "glpat-' + "xY12" * 5 + '"', "gitlab-token"),
        ("aws_key_id = AKIAIOSFODNN7EXAMPLE", "aws-access-key"),
        ("-----BEGIN OPENSSH PRIVATE KEY-----", "private-key"),
        ("-----BEGIN RSA PRIVATE KEY-----", "private-key"),
        ('slack = "xoxb-123456789012-abcdefghijkl"', "slack-token"),
        ('client_secret = "Zx8#qLw2!pR7vT0m9KbN"', "high-entropy-secret"),
        ('DB_PASS = "Zx8#qLw2!pR7vT0m9KbN"', "high-entropy-secret"),
        ("SMTP_PW: 'Zx8#qLw2!pR7vT0m9KbN'", "high-entropy-secret"),
        ('export REDIS_PASS="Zx8#qLw2!pR7vT0m9KbN"', "high-entropy-secret"),
    ],
)
def test_find_secrets_recognises_token_shapes(line: str, kind: str) -> None:
    assert kind in find_secrets(line)


@pytest.mark.parametrize(
    "line",
    [
        'password = os.environ["DB_PASSWORD"]',
        'token_url = "https://example.com/token"',
        'api_key = "<your-api-key-here>"',
        'secret = "changeme-changeme"',
        "passwordless = True",
        'bypass = "Zx8#qLw2!pR7vT0m9KbN"',
        'passenger = "Zx8#qLw2!pR7vT0m9KbN"',
        'compass_pass_through = "north"',
    ],
)
def test_find_secrets_ignores_look_alikes(line: str) -> None:
    assert find_secrets(line) == []


def test_hygiene_blocks_added_secret(tmp_path: Path) -> None:
    result = _hygiene(tmp_path, {"app/settings.py": 'GITHUB_TOKEN = "ghp_' + "Q7w" * 12 + '"\n'})
    (finding,) = [f for f in result.findings if f.rule.startswith("secret-")]
    assert finding.rule == "secret-github-token"
    assert (finding.path, finding.line) == ("app/settings.py", 1)


TEST_BODY = BASE["tests/test_core.py"]


@pytest.mark.parametrize(
    ("new_body", "rule"),
    [
        (
            TEST_BODY.replace(
                "def test_float():\n    assert add(0.1, 0.2) == pytest.approx(0.3)\n", ""
            ),
            "test-removed",
        ),
        (
            TEST_BODY.replace("def test_add", "@pytest.mark.skip(reason='later')\ndef test_add"),
            "test-skipped",
        ),
        (TEST_BODY.replace("def test_add", "@pytest.mark.xfail\ndef test_add"), "test-skipped"),
        (TEST_BODY.replace("    assert add(0, 0) == 0\n", ""), "assertions-removed"),
        (TEST_BODY.replace("assert add(0, 0) == 0", "assert True"), "trivial-assert"),
        (TEST_BODY.replace("pytest.approx(0.3)", "pytest.approx(0.3, rel=0.5)"), "loose-tolerance"),
        (
            TEST_BODY.replace("def test_add():\n", "def test_add():\n    pytest.skip('flaky')\n"),
            "test-skipped",
        ),
    ],
)
def test_hygiene_blocks_weakened_tests(tmp_path: Path, new_body: str, rule: str) -> None:
    result = _hygiene(tmp_path, {"tests/test_core.py": new_body})
    assert not result.passed
    assert rule in _rules(result)


def test_hygiene_blocks_deleted_test_file(tmp_path: Path) -> None:
    result = _hygiene(tmp_path, {"tests/test_core.py": None})
    assert {"test-file-deleted", "test-removed"} <= _rules(result)


def test_hygiene_allows_renamed_test_and_changed_assertion(tmp_path: Path) -> None:
    result = _hygiene(
        tmp_path,
        {
            "tests/test_core.py": TEST_BODY.replace(
                "assert add(1, 2) == 3", "assert add(1, 2) == 3, 'sum'"
            )
        },
    )
    assert result.passed, result.findings


def test_hygiene_blocks_unittest_skip_and_deselect_in_config(tmp_path: Path) -> None:
    result = _hygiene(
        tmp_path,
        {
            "tests/test_other.py": "import unittest\n\n\n@unittest.skip('x')\n"
            "class TestX(unittest.TestCase):\n    pass\n",
            "pyproject.toml": (
                "[tool.pytest.ini_options]\naddopts = '--deselect tests/test_core.py'\n"
            ),
        },
    )
    assert {"test-skipped", "tests-deselected"} <= _rules(result)


def test_hygiene_enforces_deny_and_allow_paths(tmp_path: Path) -> None:
    config = RepoConfig(paths=PathRules(allow=["app/**", "tests/**"], deny=["secrets/"]))
    result = _hygiene(
        tmp_path,
        {"docs/guide.md": "# New\n", "secrets/keep.txt": None, "app/core.py": "x = 1\n"},
        config=config,
    )
    by_rule = {(f.rule, f.path) for f in result.findings}
    assert ("path-not-allowed", "docs/guide.md") in by_rule
    assert ("path-denied", "secrets/keep.txt") in by_rule
    assert not any(path == "app/core.py" for _, path in by_rule)


def test_hygiene_checks_both_ends_of_a_rename(tmp_path: Path) -> None:
    repo, base = repo_with(tmp_path, BASE)
    patch = make_patch(repo, {"secrets/keep.txt": None, "app/keep.txt": "nothing\n"})
    assert "rename from secrets/keep.txt" in patch
    config = RepoConfig(paths=PathRules(deny=["secrets/**"]))
    result = HygieneGate().run(make_ctx(repo, base, patch, config=config))
    assert any(f.rule == "path-denied" and f.path == "secrets/keep.txt" for f in result.findings)


def test_hygiene_enforces_max_diff_lines(tmp_path: Path) -> None:
    big = "".join(f"x{i} = {i}\n" for i in range(30))
    settings = GateSettings(max_diff_lines=20)
    assert "diff-too-large" in _rules(_hygiene(tmp_path, {"app/big.py": big}, settings=settings))
    config = RepoConfig(gates=GateRules(max_diff_lines=100))
    result = _hygiene(tmp_path / "again", {"app/big.py": big}, config=config, settings=settings)
    assert result.passed


@pytest.mark.parametrize(
    ("path", "pattern", "expected"),
    [
        ("app/core.py", "app/**", True),
        ("app/sub/core.py", "app/*.py", False),
        ("app/sub/core.py", "**/*.py", True),
        ("core.py", "**/*.py", True),
        ("secrets/a/b.txt", "secrets/", True),
        ("deep/x.lock", "*.lock", True),
        ("docs/guide.md", "app/**", False),
    ],
)
def test_path_matches_globs(path: str, pattern: str, expected: bool) -> None:
    assert path_matches(path, pattern) is expected


@pytest.mark.parametrize(
    ("path", "code"),
    [
        ("tests/conftest.py", "def pytest_runtest_makereport(item, call):\n    pass\n"),
        ("app/plugin.py", "def pytest_report_teststatus(report, config):\n    pass\n"),
        ("tests/test_core.py", TEST_BODY + "\nimport os\nos._exit(0)\n"),
        ("tests/helpers.py", "import atexit\natexit.register(print)\n"),
    ],
)
def test_hygiene_blocks_test_harness_tampering(tmp_path: Path, path: str, code: str) -> None:
    assert "test-harness-tampered" in _rules(_hygiene(tmp_path, {path: code}))


# Go, Rust and node --test code under test runs in the test process, whose output is the
# report: a way out of it with success (Go's os.Exit is none: go test turns it into a
# failing panic), or the runner's own result lines written from code, can forge a pass.
@pytest.mark.parametrize(
    ("path", "code", "blocked"),
    [
        ("calc.go", 'package calc\n\nimport "syscall"\n\nfunc F() { syscall.Exit(0) }\n', True),
        ("calc.go", 'package calc\n\nimport s "syscall"\n\nvar f = s.Exit\n', True),
        ("calc.go", "package calc\n\nfunc F() { unix.RawSyscall(231, 0, 0, 0) }\n", True),
        ("calc.go", "package calc\n\n//go:linkname exit runtime.exit\n", True),
        ("calc.go", 'package calc\n\nvar s = "--- PASS: TestMul (0.00s)"\n', True),
        ("exit_amd64.s", "TEXT \u00b7leave(SB),4,$0\n\tMOVQ $231, AX\n\tSYSCALL\n", True),
        ("exit_amd64.s", "TEXT \u00b7leave(SB),4,$0\n\tJMP runtime\u00b7exit(SB)\n", True),
        ("src/lib.rs", "pub fn f(c: &mut Command) { let _ = c.exec(); }\n", True),
        ("calc.go", "package calc\n\nfunc F() { os.Exit(2) }\n", False),
        ("calc.go", 'package calc\n\nfunc F() { db.Exec("UPDATE t") }\n', False),
        ("src/lib.rs", "use std::process::exit as leave;\n", True),
        ("src/lib.rs", "pub fn f() { std::panic::set_hook(Box::new(|_| {})); }\n", True),
        ("src/lib.rs", 'pub fn f() { print!("test result: ok. 2 passed"); }\n', True),
        ("src/lib.rs", "pub fn on_exit() {}\n", False),
        # A literal failure status forges no pass: a CLI's error exit stays allowed.
        ("src/main.rs", "fn main() { if bad() { std::process::exit(1); } }\n", False),
        ("src/main.rs", "fn main() { std::process::exit(code()); }\n", True),
        ("calc.go", "package calc\n\nfunc F() { log.Exit(2) }\n", False),
        ("calc.go", "package calc\n\nfunc F() { syscall.Exit(code) }\n", True),
        # libc by what it calls: its ways out, not every use of the crate.
        ("src/lib.rs", "pub fn tty() -> bool { unsafe { libc::isatty(0) == 1 } }\n", False),
        ("src/lib.rs", "pub fn f() { unsafe { libc::_exit(0) } }\n", True),
        ("src/lib.rs", "pub fn f() { unsafe { libc::syscall(231, 0) }; }\n", True),
        ("lib/calc.js", "function f() { process.exit(0); }\n", True),
        ("lib/calc.js", "function f(code) { process.reallyExit(code); }\n", True),
        ("lib/calc.js", "const { DefaultSerializer } = require('v8');\n", True),
        ("lib/calc.ts", "const ev = { type: 'test:pass' };\n", True),
        ("bin/cli.js", "if (bad) process.exit(1);\n", False),
        # The same words in Python are not a Go, Rust or node test process's way out.
        ("app/ops.py", "def f(syscall):\n    return syscall.Exit\n", False),
        # A method, a field or a function being defined is not the process's exit, and
        # a comment is prose (review of the first rules: each blocked an honest patch).
        ("src/lib.rs", "pub fn stop(h: &JoinHandle<()>) { h.abort(); }\n", False),
        ("src/lib.rs", "impl Subscriber for S {\n    fn exit(&self, span: &Id) {}\n}\n", False),
        ("src/main.rs", 'fn main() { println!("Checking {}... ok", 3); }\n', False),
        ("src/lib.rs", "// parse the header ... ok, then the body\npub fn f() {}\n", False),
        ("calc.go", "package calc\n\nfunc F(res Result) bool { return res.Exit != 0 }\n", False),
        ("calc.go", "package calc\n\nfunc F(r *Run, code int) { r.Exit = code }\n", False),
        (
            "calc.go",
            'package calc\n\nfunc F(e *os.SyscallError) bool { return e.Syscall == "a" }\n',
            False,
        ),
        ("calc.go", "package calc\n\nfunc F(cfg Config) int { return cfg.C.Timeout }\n", False),
        ("calc.go", "package calc\n\n// See section C.2 of the spec.\nfunc F() {}\n", False),
        ("calc.go", 'package calc\n\n// SVC names the service.\nconst SVC = "calc"\n', False),
        ("calc.go", "package calc\n\nconst ctrlV = '\\x16'\n", False),
        ("lib/clone.js", "const clone = (o) => v8.deserialize(v8.serialize(o));\n", False),
        ("lib/calc.js", "import process from 'node:process';\nprocess.exitCode = 1;\n", False),
        # ...but the marker before framing words, and a directive, still count.
        ("calc.go", 'package calc\n\nvar m = "\\x16" + "=== RUN TestMul"\n', True),
        ("calc.go", "package calc\n\n//go:linkname leave runtime.exit\n", True),
        ("calc.go", 'package calc\n\n// #include <stdlib.h>\nimport "C"\n', True),
        # The same exits under another name.
        ("src/lib.rs", "use std::process::{exit as q};\n", True),
        ("src/lib.rs", "use std::process::{\n    abort as stop,\n};\n", True),
        ("lib/calc.js", "const { exit } = process;\nexit(0);\n", True),
        ("lib/calc.js", "const p = process;\np.exit(0);\n", True),
        ("lib/calc.js", "process.exit.call(process, 0);\n", True),
        ("lib/calc.js", "Reflect.apply(process.exit, process, [0]);\n", True),
        ("lib/calc.js", "import { exit as q } from 'node:process';\n", True),
        # go test makes os.Exit(0) panic only inside M.Run, so a library's init may not
        # exit; package main (a CLI) and a test file's TestMain may.
        ("calc.go", 'package calc\n\nimport "os"\n\nfunc init() { os.Exit(0) }\n', True),
        ("cmd/calc/main.go", "package main\n\nfunc main() { os.Exit(run()) }\n", False),
        (
            "calc_test.go",
            "package calc\n\nfunc TestMain(m *testing.M) { os.Exit(m.Run()) }\n",
            False,
        ),
        ("calc.go", "// package main\npackage calc\n\nfunc init() { os.Exit(0) }\n", True),
    ],
)
def test_hygiene_blocks_ways_out_of_an_unwatched_test_process(
    tmp_path: Path, path: str, code: str, blocked: bool
) -> None:
    rules = _rules(_hygiene(tmp_path, {path: code}))
    assert ("test-harness-tampered" in rules) is blocked, rules


# A Go file's package is read from the file as the patch leaves it: a hunk far from the
# top carries no package clause.
@pytest.mark.parametrize(("package", "blocked"), [("main", False), ("calc", True)])
def test_hygiene_reads_a_go_files_package_from_the_patched_file(
    tmp_path: Path, package: str, blocked: bool
) -> None:
    body = "".join(f"// line {n}\n" for n in range(20))
    old = f'package {package}\n\nimport "os"\n\n' + body + "func run() int { return 0 }\n"
    repo, base = repo_with(tmp_path, {**BASE, "cmd/calc/run.go": old})
    new = old + "\nfunc init() { os.Exit(run()) }\n"
    patch = make_patch(repo, {"cmd/calc/run.go": new})
    assert "package " not in "".join(
        line for line in patch.splitlines(keepends=True) if line.startswith(("+", " "))
    )
    rules = _rules(HygieneGate().run(make_ctx(repo, base, patch)))
    assert ("test-harness-tampered" in rules) is blocked, rules


# colorama's real fix (tartley/colorama#328) explains its except clause with "when atexit
# runs": prose in a comment is no hook. Code before a comment, and a "comment" that holds
# a quote (the line may really sit inside a string that the quote closes), still count.
_DETACHED = "def closed(stream):\n    try:\n        return stream.closed\n"


@pytest.mark.parametrize(
    ("code", "blocked"),
    [
        (_DETACHED + "    # ValueError: the stream was detached when atexit runs\n", False),
        (_DETACHED + "    except ValueError:  # raised at atexit time\n        pass\n", False),
        ("import atexit  # exit handlers\n", True),
        ('x = 1\n# """; import atexit\n', True),
        ("# sys.modules['pytest'] = None before atexit\n", True),
    ],
)
def test_hygiene_reads_python_comments_as_prose(tmp_path: Path, code: str, blocked: bool) -> None:
    rules = _rules(_hygiene(tmp_path, {"app/stream.py": code}))
    assert ("test-harness-tampered" in rules) is blocked, rules


@pytest.mark.timeout(60)
def test_secret_scan_of_a_huge_minified_line_finishes() -> None:
    """A quadratic pattern took 38 s on 16k characters; with bounded quantifiers the
    work per position is bounded, so 100k-character lines of every shape that used to
    backtrack finish (pytest-timeout fails a regression, no wall-clock assertion)."""
    from worker.gates.secrets import find_secrets

    tail = "ghp_" + "A1b2" * 10
    shapes = [
        "var a=" + "x" * 100_000 + f";token='{tail}'",
        "password" * 12_500,
        "token = '" + "a" * 100_000,
        "xoxa-" * 20_000,
        "sys.modules[" * 8_000,
    ]
    for line in shapes:
        find_secrets(line)
    assert find_secrets(shapes[0]) == ["github-token"]
