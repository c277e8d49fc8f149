"""Real public Go and Rust projects through the setup step and the gates, with no
``.ribbit.yml``: the test command is detected from the base tree (``go.mod``,
``Cargo.toml``) and reports per test (gotestsum's JUnit; libtest's output).

Neither needs a downloaded dependency (the test machines reach no Go proxy and no
crates.io). Both are vendored, pinned, with their licences (tests/fixtures/*/README.md):

- Go: hashicorp/go-version 1.8.0 (Debian's upstream tarball), with its fix for versions
  holding ``~`` (upstream 43575a7, "Fixes version parsing for versions including ~")
  taken out: 13 tests fail at the base; the fix passes the gates.
- Rust: comex/rust-shlex 1.3.0 (Debian's upstream tarball), with its fix for
  GHSA-r7qv-8r2h-pg27 (``quote`` left ``{``, ``}`` and non-ASCII bytes unquoted) taken
  out of ``src/bytes.rs``: 2 tests fail at the base; the fix passes.

A patch that fixes the bug and breaks something else is blocked test by test, the
regression named by its runner's id.
"""

from __future__ import annotations

from functools import partial, reduce
from pathlib import Path

import pytest

from bot.store.records.gate_report import GateReport
from tests.fakes import make_git_repo
from tests.support import require_service
from tests.unit.worker.gates.helpers import make_patch
from worker.gates import GateContext, run_gates
from worker.gates.hygiene import HygieneGate
from worker.gates.tests import TestGate
from worker.repo_config import RepoConfig
from worker.sandbox import sandbox_factory
from worker.sandbox.setup import run_setup
from worker.settings import GateSettings, SandboxSettings

pytestmark = pytest.mark.integration

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"

GO_FIXED = (
    "\t\t`(-([0-9]+[0-9A-Za-z\\-~]*(\\.[0-9A-Za-z\\-~]+)*)|"
    "(-?([A-Za-z\\-~]+[0-9A-Za-z\\-~]*(\\.[0-9A-Za-z\\-~]+)*)))?` +\n"
    "\t\t`(\\+([0-9A-Za-z\\-~]+(\\.[0-9A-Za-z\\-~]+)*))?` +\n"
    "\t\t`?`\n\n\t// SemverRegexpRaw"
)
GO_BUGGY = GO_FIXED.replace("\\-~", "\\-")
GO_MODULE = "github.com/hashicorp/go-version"

# GHSA-r7qv-8r2h-pg27 as 1.2.1 fixed it, put back into 1.3.0's code: `{` and `}` among the
# bytes left unquoted, and bytes from 0x80 up no longer forced into quotes.
RUST_BUG = (
    (
        "        '0'..='9' | 'A'..='Z' | 'a'..='z'\n        => true,",
        "        '0'..='9' | 'A'..='Z' | 'a'..='z' | '{' | '}'\n        => true,",
    ),
    (
        "        // Brace expansion.  These ought to be in the POSIX list but aren't yet;\n"
        "        // see: https://www.austingroupbugs.net/view.php?id=1193\n"
        "        '{' | '}' |\n",
        "",
    ),
    ("            cur_ok &= !UNQUOTED_OK;\n        } else {", "        } else {"),
)


def _files(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): p.read_text()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name not in ("README.md", "fix.patch")
    }


def _with(files: dict[str, str], path: str, old: str, new: str) -> dict[str, str]:
    assert files[path].count(old) == 1, f"{path} no longer holds the expected code"
    return {**files, path: files[path].replace(old, new)}


GO_UPSTREAM = _files(FIXTURES / "go-version")
RUST_UPSTREAM = _files(FIXTURES / "shlex")
GO_BASE = _with(GO_UPSTREAM, "version.go", GO_FIXED, GO_BUGGY)
RUST_BASE = reduce(lambda files, edit: _with(files, "src/bytes.rs", *edit), RUST_BUG, RUST_UPSTREAM)


@pytest.fixture(scope="module")
def repos(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, str, str, str]]:
    """name -> (repo, base commit, the upstream fix, the fix plus a regression)."""
    made = {}
    go = tmp_path_factory.mktemp("go-version") / "repo"
    go_base = make_git_repo(go, GO_BASE)
    go_fix = make_patch(go, {"version.go": GO_UPSTREAM["version.go"]})
    # Collection sorts by LessThan; turned around it breaks TestCollection, which passed.
    collection = GO_UPSTREAM["version_collection.go"]
    go_breaks = make_patch(
        go,
        {
            "version.go": GO_UPSTREAM["version.go"],
            "version_collection.go": collection.replace(
                "return v[i].LessThan(v[j])", "return v[j].LessThan(v[i])"
            ),
        },
    )
    made["go"] = (go, go_base, go_fix, go_breaks)
    rust = tmp_path_factory.mktemp("shlex") / "repo"
    rust_base = make_git_repo(rust, RUST_BASE)
    rust_fix = make_patch(rust, {"src/bytes.rs": RUST_UPSTREAM["src/bytes.rs"]})
    lib = RUST_UPSTREAM["src/lib.rs"]
    rust_breaks = make_patch(
        rust,
        {
            "src/bytes.rs": RUST_UPSTREAM["src/bytes.rs"],
            # split() gives up on a "$": test_split (which splits "foo$baz") fails.
            "src/lib.rs": lib.replace(
                "pub fn split(in_str: &str) -> Option<Vec<String>> {",
                "pub fn split(in_str: &str) -> Option<Vec<String>> {\n"
                "    if in_str.contains('$') { return None; }",
            ),
        },
    )
    made["rust"] = (rust, rust_base, rust_fix, rust_breaks)
    return made


@pytest.fixture(params=["bubblewrap", "docker"])
def settings(request: pytest.FixtureRequest) -> SandboxSettings:
    base: SandboxSettings = request.getfixturevalue(f"{request.param}_settings")
    if request.param == "bubblewrap":
        # bubblewrap runs the host's /usr: the toolchains come from the host's packages.
        for tool in ("go", "gotestsum", "cargo"):
            require_service(Path("/usr/bin", tool).exists(), f"{tool} in /usr/bin")
    # Compilers reserve far more address space than they use, and bubblewrap's limit
    # is per process: the defaults, not the small test limits.
    return base.model_copy(update={"memory_mb": 2048, "pids": 256, "workspace_mb": 256})


def _gate(
    settings: SandboxSettings, repo: Path, base: str, patch: str, *, all_gates: bool
) -> GateReport:
    config = RepoConfig()  # no .ribbit.yml: the command is detected
    return run_gates(
        GateContext(
            repo_dir=repo,
            base_commit=base,
            patch=patch,
            repo_config=config,
            gate_settings=GateSettings(test_timeout_s=300),
            sandbox_factory=sandbox_factory(settings),
            setup_step=partial(run_setup, repo_config=config, settings=settings),
        ),
        None if all_gates else [TestGate(), HygieneGate()],
    )


EXPECTED = {
    # runner, passing tests after the fix, tests that fail at the base
    "go": ("go", 30, {f"{GO_MODULE}::TestNewVersion", f"{GO_MODULE}::TestVersionMetadata"}),
    # 10 unit tests and the doctest in src/bytes.rs.
    "rust": ("cargo", 11, {"src/lib.rs::bytes::test_quote", "src/lib.rs::bytes::test_join"}),
}


@pytest.mark.parametrize("project", ["go", "rust"])
def test_upstream_fix_passes_the_gates_with_a_detected_command(
    repos: dict[str, tuple[Path, str, str, str]], project: str, settings: SandboxSettings
) -> None:
    repo, base, fix, _ = repos[project]
    runner, passing, failing_before = EXPECTED[project]
    # Semgrep runs on the host whatever the backend: once is enough.
    report = _gate(settings, repo, base, fix, all_gates=settings.backend == "bubblewrap")
    assert report.passed, report.to_markdown()
    tests = report.result("tests")
    assert tests is not None
    assert tests.details["runner"] == runner and tests.details["command_source"] != ".ribbit.yml"
    before, after = tests.details["before"], tests.details["after"]
    assert isinstance(before, dict) and isinstance(after, dict)
    assert before["per_test"] and after["per_test"], tests.logs
    assert failing_before <= set(before["failing"]), before
    assert after["counts"]["passed"] == passing and after["counts"]["failed"] == 0, tests.logs


REGRESSION = {
    "go": f"{GO_MODULE}::TestCollection",
    "rust": "src/lib.rs::test_split",
}


@pytest.mark.parametrize("project", ["go", "rust"])
def test_fix_that_breaks_another_test_is_blocked_by_that_test(
    repos: dict[str, tuple[Path, str, str, str]], project: str, bubblewrap_settings: SandboxSettings
) -> None:
    require_service(Path("/usr/bin/cargo").exists() and Path("/usr/bin/go").exists(), "go, cargo")
    settings = bubblewrap_settings.model_copy(
        update={"memory_mb": 2048, "pids": 256, "workspace_mb": 256}
    )
    repo, base, _, breaks = repos[project]
    report = _gate(settings, repo, base, breaks, all_gates=False)
    tests = report.result("tests")
    assert tests is not None and not tests.passed
    assert tests.details["regressions"] == [REGRESSION[project]], tests.logs
