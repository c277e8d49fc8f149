"""Honest patches pass (issue #31; one corpus with the real-repositories issue #35): real
merged fixes from small public projects, each vendored at the fix's parent (or a release
just before it, or one after it with the fix taken out) with its licence
(tests/fixtures/<project>/README.md), judged by ``ribbit gates`` on bubblewrap with no
``.ribbit.yml`` (the set-up and test command detected from the tree).

Each fix adds or changes a test that fails on the parent and passes with the fix. Those
ids (``FIX_TO_PASS``) were recorded by running the project's own tests outside Ribbit
(pytest in a virtualenv, ``go test``, ``cargo test``, mocha, ``node --test``) with the
fix's test files on the parent's code and on the fixed tree; the verdict must be verified
(exit 0) with those tests as its evidence, no finding of severity error and no tamper
finding. A test the fix adds that already passes on the parent (``new_passing``) must not
be named as evidence.

Twenty-three fixes today (Python: parse x3, cachetools 7.0.2, humanize x2, pathspec,
semantic_version, marshmallow, sqlparse x3, python-tabulate, python-semver, structlog;
Go: semver, go-radix, go-humanize; Rust: version_check x2, rust-shlex; JavaScript: jshttp/cookie on
mocha, broofa/mime's TypeScript compiled by its ``pretest`` and tested by ``node
--test``): one ``ribbit gates`` run per fix, 10 to 90 seconds each, the projects side by
side (the slow tier). The Go and Rust trees are Debian's ``.orig`` tarballs of the
upstream releases, pinned by hash in their READMEs; a Rust fix's evidence is its test code
(a ``#[cfg(test)]`` module, function or table) taken onto the parent's code. The
JavaScript fixes come from Debian's source packages too (upstream's trees with their
tests; the npm tarballs ship none) and install their trimmed test dependencies from the
npm registry with ``npm ci``; ``_base_repo`` commits the tree as the patches leave it, so
mime's executable ``test/exports_test.sh`` stays executable. The Python
fixes added last come from the projects' sdists on PyPI, pinned by hash in their
READMEs: a release's files as the base (each README says how they stand to the fix's
parent), the fix's hunks as the next release's sdist has them. Their layouts differ on
purpose: a ``src/`` layout (python-semver, with a conftest, pytest-cov and
``--import-mode=importlib`` from its own ``setup.cfg``), a ``test/`` folder
(python-tabulate), PEP 735 dependency groups (structlog, its ``tests`` group installed
from PyPI). python-semver's and structlog's own code reads frames, so their verdicts
carry warnings the base shares (``BASE_READS_FRAMES``)."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.fakes import make_git_repo
from tests.support import GatesResult, GatesRun, gates_side_by_side, require_service

# The first test to ask for a report waits for every selected fix's ``ribbit gates`` run
# (the judge fixture, side by side): about 4 minutes alone on two cores, far more on a
# loaded machine, so the suite-wide 300 s limit would cut it. Each run has its own limit
# (tests.support.GATES_RUN_LIMIT_S), so a hang still ends.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(3600)]

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@dataclass(frozen=True)
class RealFix:
    """One upstream fix: where it comes from and what its tests show outside Ribbit."""

    fixture: str  # the folder under tests/fixtures
    patches: tuple[str, ...]  # applied in order to an empty tree: the fix's parent
    fix: str  # the upstream commit's diff over the vendored files
    repo: str
    commit: str
    licence: str
    issue: str  # what a maintainer would have filed
    # Fail on the parent's code, pass with the fix, named as Ribbit names them: pytest's
    # node ids, go test's package and test joined by "::", for cargo the target's root
    # file and the test's module path.
    fail_to_pass: frozenset[str]
    toolchain: str  # the host binary the project's tests need
    # Tests the fix adds that already pass on the parent's code: no evidence.
    new_passing: frozenset[str] = frozenset()
    # The base's own files whose frame reads the tests gate reports as warnings
    # ("tamper-in-base"): code that reads frames for its own ends, with or without the fix.
    base_reads_frames_in: frozenset[str] = frozenset()


CORPUS = (
    RealFix(
        fixture="parse",
        patches=("base.patch",),
        fix="fix.patch",
        repo="r1chardj0n3s/parse",
        commit="35b9ffb355f94bc4cb781fbb3b0adff2232a5602",
        licence="MIT",
        issue="parse rejects a grouping option\n'{:,d}' raises ValueError: format spec ',d' "
        "not recognised; format() accepts it, so parse should read '1,234' back.",
        fail_to_pass=frozenset({"tests/test_parse.py::test_numbers"}),
        toolchain="python3",
    ),
    RealFix(
        fixture="parse",
        patches=("base.patch", "hyphen-base.patch"),
        fix="hyphen-fix.patch",
        repo="r1chardj0n3s/parse",
        commit="9c9ec7fe886c195a369446ec5f2a57930b627f8a",
        licence="MIT",
        issue="Hyphens in field names (#86)\nparse('{my-field}', 'x') does not match; "
        "a field name with a hyphen should work.",
        fail_to_pass=frozenset(
            {
                "tests/test_parse.py::test_hyphen_inside_field_name",
                "tests/test_parse.py::test_hyphen_inside_field_name_collision_handling",
            }
        ),
        toolchain="python3",
    ),
    RealFix(
        fixture="cachetools-v7",
        patches=("base.patch",),
        fix="fix.patch",
        repo="tkem/cachetools",
        commit="57d2e4813d9801f97034559e22428bac6f7c6c9b",
        licence="MIT",
        issue="inspect on a @cachedmethod fails (#387)\nAccessing the descriptor on the "
        "class (obj is None), as unittest.mock's autospec does, raises and warns.",
        fail_to_pass=frozenset(
            {"tests/test_cachedmethod.py::AutospecTest::test_autospec_no_warnings"}
        ),
        toolchain="python3",
    ),
    RealFix(
        fixture="humanize",
        patches=("base.patch",),
        fix="fractional-fix.patch",
        repo="python-humanize/humanize",
        commit="c2c410c1521a3b1eb3efef52f3b06c2e42f7b92b",
        licence="MIT",
        issue="fractional prints two minus signs\nfractional(-1.3) gives '-1 -3/10'; "
        "it should be '-1 3/10'.",
        fail_to_pass=frozenset(
            {
                "tests/test_number.py::test_fractional[-1.3--1 3/10]",
                "tests/test_number.py::test_fractional[-2.5--2 1/2]",
            }
        ),
        toolchain="python3",
        new_passing=frozenset({"tests/test_number.py::test_fractional[-0.5--1/2]"}),
    ),
    RealFix(
        fixture="humanize",
        patches=("base.patch",),
        fix="rollover-fix.patch",
        repo="python-humanize/humanize",
        commit="823ad6096e1e5ba82ea876ce761fc2efebd76157",
        licence="MIT",
        issue="naturalsize says 1000.0 kB\nnaturalsize(999_950) gives '1000.0 kB' where it "
        "should roll over to '1.0 MB' (the same at every unit boundary).",
        fail_to_pass=frozenset(
            f"tests/test_filesize.py::test_naturalsize[test_args{n}-{text}]"
            for n, text in (
                (70, "1.0 MB"),
                (71, "1.0 GB"),
                (72, "1.0 TB"),
                (73, "1.0 MiB"),
                (74, "1.0 GiB"),
                (75, "1.0M"),
            )
        ),
        toolchain="python3",
    ),
    RealFix(
        fixture="semver",
        patches=("base.patch",),
        fix="fix.patch",
        repo="Masterminds/semver",
        commit="252dd61dd30c2bcf2bcfc30be1428c68d8f25934",
        licence="MIT",
        issue="Invalid versions are accepted (#211)\nStrictNewVersion accepts '1.1.2+.123', "
        "'1.0.0-alpha..' and other strings with an empty identifier, which the SemVer spec "
        "forbids.",
        fail_to_pass=frozenset({"github.com/Masterminds/semver/v3::TestStrictNewVersion"}),
        toolchain="go",
        # Changed, and passes without the fix: its new rows are errors on 3.2.0 already.
        new_passing=frozenset({"github.com/Masterminds/semver/v3::TestNewVersion"}),
    ),
    RealFix(
        fixture="version_check",
        patches=("base.patch",),
        fix="fix.patch",
        repo="SergioBenitez/version_check",
        commit="2aecb2a3eb4ea0c30f1f13e98f1ab9fa1b4c8dee",
        licence="MIT OR Apache-2.0",
        issue='Date\'s Display drops leading zeros\nDate::parse("2019-05-08") prints as '
        "2019-5-8; it should print as it was parsed.",
        # The fix adds a ``display`` test to src/date.rs and another to src/version.rs;
        # only the first fails on the parent's code (version's Display was right).
        fail_to_pass=frozenset({"src/lib.rs::date::tests::display"}),
        toolchain="cargo",
        # In the crate's code files: the evidence run takes only the patch's test changes
        # onto the parent's code (worker/gates/rusttests.py); this one passes there.
        new_passing=frozenset({"src/lib.rs::version::tests::display"}),
    ),
    RealFix(
        fixture="parse",
        patches=("base.patch", "subsecond-base.patch"),
        fix="subsecond-fix.patch",
        repo="r1chardj0n3s/parse",
        commit="b1d2121902a0d3a2e3a58758d24dad1ead9a3c61",
        licence="MIT",
        issue="%f needs exactly six digits\nparse('{dt:%H:%M:%S.%f}', '13:23:27.123') does "
        "not match; strptime's %f takes one to six digits.",
        fail_to_pass=frozenset(
            {"tests/test_parse.py::test_datetime_with_various_subsecond_precision"}
        ),
        toolchain="python3",
    ),
    RealFix(
        fixture="pathspec",
        patches=("base.patch",),
        fix="fix.patch",
        repo="cpburnz/python-pathspec",
        commit="cebf13fe5c986178d277bc7e01baa28fd10742d2",
        licence="MPL-2.0",
        issue="Negate with caret as with the exclamation mark (#77)\nIn .gitignore, "
        "'a[^gy]c' matches 'abc' as 'a[!gy]c' does; pathspec reads the caret literally.",
        fail_to_pass=frozenset(
            f"tests/test_gitwildmatch.py::GitWildMatchTest::{name}"
            for name in ("test_13_issue_77_regex", "test_13_negate_with_caret")
        ),
        toolchain="python3",
        new_passing=frozenset(
            {"tests/test_gitwildmatch.py::GitWildMatchTest::test_13_negate_with_exclamation_mark"}
        ),
    ),
    RealFix(
        fixture="semantic_version",
        patches=("base.patch",),
        fix="fix.patch",
        repo="rbarrois/python-semanticversion",
        commit="57c78e7307792879dce33734c11e7774383b9d36",
        licence="BSD-2-Clause",
        issue="Sorting is not stable with build metadata (#132)\nsorted(versions, "
        "key=lambda v: v.precedence_key) orders 0.1.0+a and 0.1.0+a.1 as they came in; "
        "any permutation should sort the same.",
        fail_to_pass=frozenset({"tests/test_base.py::VersionTestCase::test_stable_ordering"}),
        toolchain="python3",
    ),
    RealFix(
        fixture="marshmallow",
        patches=("base.patch",),
        fix="fix.patch",
        repo="marshmallow-code/marshmallow",
        commit="8f493e66b38d71269a8388b120b537a7fbd60ca8",
        licence="MIT",
        issue="Error message shows placeholders (#2245)\nA field declared as a class "
        "raises 'Field for \"{field_name}\" must be declared as a Field instance': the "
        "field's name is never filled in.",
        fail_to_pass=frozenset({"tests/test_schema.py::test_fields_must_be_declared_as_instances"}),
        toolchain="python3",
    ),
    RealFix(
        fixture="sqlparse",
        patches=("base.patch",),
        fix="hint-fix.patch",
        repo="andialbrecht/sqlparse",
        commit="2f9c7ec38f98c004ee8c328ed24ba49bd19951bc",
        licence="BSD-3-Clause",
        issue="strip_comments removes SQL hints (#262)\nformat('insert /*+ DIRECT */ into t "
        "select 1', strip_comments=True) drops the optimizer hint; hints are not comments.",
        fail_to_pass=frozenset(
            {"tests/test_format.py::TestFormat::test_strip_comments_preserves_hint"}
        ),
        toolchain="python3",
    ),
    RealFix(
        fixture="sqlparse",
        patches=("base.patch", "split-base.patch"),
        fix="split-fix.patch",
        repo="andialbrecht/sqlparse",
        commit="791e25de46f443597d99314cfd1a68217bcaf970",
        licence="BSD-3-Clause",
        issue="split cuts a trigger with two CASEs (#784)\nsqlparse.split on a CREATE "
        "TRIGGER whose BEGIN block holds two statements with CASE ... END returns the "
        "statement cut in two.",
        fail_to_pass=frozenset({"tests/test_split.py::test_split_multiple_case_in_begin"}),
        toolchain="python3",
    ),
    RealFix(
        fixture="sqlparse",
        patches=("base.patch", "whitespace-base.patch"),
        fix="whitespace-fix.patch",
        repo="andialbrecht/sqlparse",
        commit="0c4902f3f7aafa8c2e63a375ec307c210842f543",
        licence="BSD-3-Clause",
        issue="strip_whitespace keeps a space before ')' (#782)\nformat('( where foo = bar  "
        ") from', strip_whitespace=True) gives '(where foo = bar ) from'; the whitespace "
        "at the end of a group should go too.",
        fail_to_pass=frozenset(
            {"tests/test_format.py::test_strip_ws_removes_trailing_ws_in_groups"}
        ),
        toolchain="python3",
    ),
    # JavaScript: mocha, and node's test runner over TypeScript that pretest compiles.
    RealFix(
        fixture="cookie",
        patches=("base.patch",),
        fix="fix.patch",
        repo="jshttp/cookie",
        commit="6a8b8f5a49af7897b98ebfb29a1c4955afa3d33e",
        licence="MIT",
        issue="serialize rejects a domain with a leading dot (#173)\nserialize('foo', 'bar', "
        "{ domain: '.example.com' }) throws 'option domain is invalid'; browsers ignore the "
        "leading dot, and 0.6 accepted it.",
        fail_to_pass=frozenset(
            {
                'cookie.serialize(name, value, options) with "domain" option'
                "::should serialize valid domain"
            }
        ),
        toolchain="node",
    ),
    RealFix(
        fixture="mime",
        patches=("base.patch",),
        fix="fix.patch",
        repo="broofa/mime",
        commit="d7871f3bac120df5e4776e7c395b39d0d8e7b562",
        licence="MIT",
        issue="getType fails on names with line breaks (#334)\nmime.getType('LINE\\nFEED.png') "
        "returns null: the regular expressions that strip the path and the name stop at a "
        "line terminator.",
        fail_to_pass=frozenset({"class Mime > getType()"}),
        toolchain="node",
    ),
    # Python fixes, second batch
    RealFix(
        fixture="tabulate",
        patches=("base.patch",),
        fix="fix.patch",
        repo="astanin/python-tabulate",
        commit="87a9a4e07a5efb39b81fdb6ac513b1d345bb21fb",
        licence="MIT",
        issue="Empty table with maxheadercolwidths crashes (#365)\ntabulate([], "
        "headers=['one', 'two'], maxheadercolwidths=5) raises IndexError.",
        fail_to_pass=frozenset(
            {"test/test_regression.py::test_empty_table_with_maxheadercolwidths"}
        ),
        toolchain="python3",
    ),
    # Go and Rust fixes, second batch: upstream trees from Debian's orig tarballs, one
    # with two releases around the fix (go-radix), three with the fix taken out of the
    # release that has it (tests/fixtures/<fixture>/README.md says how).
    RealFix(
        fixture="go-radix",
        patches=("base.patch",),
        fix="fix.patch",
        repo="armon/go-radix",
        commit="f30034d78803af4786015a5a3a265a40b5837a70",
        licence="MIT",
        issue="Delete inside WalkPrefix panics (#22)\nA WalkFn that calls Delete on each key "
        "it is given, to drop every key under a prefix, ends in a nil pointer dereference.",
        fail_to_pass=frozenset({"github.com/armon/go-radix::TestWalkDelete"}),
        toolchain="go",
    ),
    RealFix(
        fixture="go-humanize",
        patches=("base.patch",),
        fix="fix.patch",
        repo="dustin/go-humanize",
        commit="9ec74ab2f7a7161664182fd4e5e292fccffbc75f",
        licence="MIT",
        issue='SIWithDigits drops zeroes (#106)\nSIWithDigits(20, 0, "U") gives "2 U" and '
        'FtoaWithDigits(20, 0) gives "2": the zeroes of a whole number are stripped.',
        fail_to_pass=frozenset(
            f"github.com/dustin/go-humanize::{name}"
            for name in ("TestFtoaWithDigits", "TestBug106")
        ),
        toolchain="go",
        # Its new row (Ftoa(20.0)) never reached the stripping: it passes on the parent.
        new_passing=frozenset({"github.com/dustin/go-humanize::TestFtoa"}),
    ),
    RealFix(
        fixture="version_check",
        # 0.9.5 as released (the Display fix above put back), then this fix taken out.
        patches=("base.patch", "fix.patch", "strict-base.patch"),
        fix="strict-fix.patch",
        repo="SergioBenitez/version_check",
        commit="4ef0226d68908ac0437e6eb584b7b981d7d9d439",
        licence="MIT OR Apache-2.0",
        issue='Version::parse accepts malformed versions (#11)\nVersion::parse("1.65536.2") '
        'gives 1.2.0 and Version::parse("1. 2") gives 1.0.0: parts that are not numbers '
        "are skipped; such strings should not parse.",
        fail_to_pass=frozenset({"src/lib.rs::version::tests::test_malformed"}),
        toolchain="cargo",
    ),
    RealFix(
        fixture="shlex-single-quote",
        patches=("base.patch",),
        fix="fix.patch",
        repo="comex/rust-shlex",
        commit="6db4704fcad8393dd6947b1d31720327546a84a2",
        licence="MIT OR Apache-2.0",
        issue="Backslashes escape inside single quotes (#6)\nshlex::split(r\"'\\\\n'\") gives "
        '[r"\\n"]; bash, zsh and Python\'s shlex keep both backslashes, since nothing is '
        "escaped between single quotes.",
        fail_to_pass=frozenset({"src/lib.rs::test_split", "src/lib.rs::bytes::test_split"}),
        toolchain="cargo",
    ),
)


# Python fixes, second batch: python-semver's deprecation decorator reads its caller's frame
# (``inspect.currentframe().f_back``) whenever a test calls a deprecated function, on the
# base code and with the fix alike, so the watched run holds a frame access the gate
# reports as a warning, "tamper-in-base", beside its verified verdict. structlog does the
# same wherever it finds a log line's call site (``sys._getframe``) or renders a
# traceback (``tb_frame``).
BASE_READS_FRAMES = (
    RealFix(
        fixture="python-semver",
        patches=("base.patch",),
        fix="fix.patch",
        repo="python-semver/python-semver",
        commit="bc41390f388d88114e8529b17fe145c5af390cbb",
        licence="BSD-3-Clause",
        issue="Comparing a Version subclass with a Version raises\nclass V(Version): pass; "
        "V.parse('1.0.0') == Version.parse('1.0.0') raises TypeError: the comparison "
        "should defer to the other operand.",
        fail_to_pass=frozenset({"tests/test_subclass.py::test_compare_with_subclass"}),
        toolchain="python3",
        base_reads_frames_in=frozenset({"src/semver/_deprecated.py"}),
    ),
    # PEP 735: the tests live in [dependency-groups], not in an extra (issue #35).
    RealFix(
        fixture="structlog",
        patches=("base.patch",),
        fix="fix.patch",
        repo="hynek/structlog",
        commit="c44431c544095e61163598372737c1c76a91790f",
        licence="MIT OR Apache-2.0",
        issue="MaybeTimeStamper overwrites a custom key (#747)\nMaybeTimeStamper(key="
        "'timestamp2') replaces a timestamp2 the event already has: it checks for "
        "'timestamp', not its own key.",
        fail_to_pass=frozenset(
            {"tests/processors/test_renderers.py::TestMaybeTimeStamper::test_overwrite_custom_key"}
        ),
        toolchain="python3",
        # A logging library: it finds its callers' frames to name where a line was logged.
        base_reads_frames_in=frozenset(
            {
                "src/structlog/_frames.py",
                "src/structlog/_native.py",
                "src/structlog/stdlib.py",
                "src/structlog/threadlocal.py",
                "src/structlog/tracebacks.py",
            }
        ),
    ),
)


def _case_id(fix: RealFix) -> str:
    return f"{fix.repo.split('/')[1]}-{fix.commit[:7]}"


def _base_repo(fix: RealFix, root: Path) -> Path:
    """The fix's parent as a git repository with no .ribbit.yml, committed as the
    patches leave it, so file modes hold (mime's test script runs
    ``./test/exports_test.sh``)."""
    repo = root / "repo"
    repo.mkdir()
    for patch in fix.patches:
        subprocess.run(["git", "apply", str(FIXTURES / fix.fixture / patch)], cwd=repo, check=True)
    make_git_repo(repo, {})
    return repo


def _findings(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [f | {"gate": g["name"]} for g in report["gates"] for f in g["findings"]]


Judge = Callable[[RealFix], GatesResult]


@dataclass(frozen=True)
class _ProjectRuns:
    """One project's gates runs, judged one after another, and the data dir they share
    (so the set-up cache, as two jobs on one repository would)."""

    data: Path
    runs: list[GatesRun] = field(default_factory=list)


def _selected(session: pytest.Session) -> set[RealFix]:
    """The fixes whose tests this run kept (after ``-k`` and the like)."""
    chosen: set[RealFix] = set()
    for item in session.items:
        callspec = getattr(item, "callspec", None)
        fix = callspec.params.get("fix") if callspec is not None else None
        if isinstance(fix, RealFix):
            chosen.add(fix)
    return chosen


@pytest.fixture(scope="module")
def judge(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Judge:
    """``ribbit gates`` on every fix this run selected that the machine has the toolchain
    for, once per module, side by side (tests.support.gates_side_by_side): the tests below
    read one report each, and ``-k`` on one fix judges that fix alone. A data dir per
    project, so two fixes of one project share the cached set-up, as two jobs on one
    repository would, and run one after the other."""
    reports: dict[RealFix, GatesResult] = {}

    def judge_all(wanted: set[RealFix]) -> None:
        projects: dict[str, _ProjectRuns] = {}
        fixes: dict[GatesRun, RealFix] = {}
        for fix in (*CORPUS, *BASE_READS_FRAMES):
            if fix not in wanted or shutil.which(fix.toolchain) is None:
                continue
            checkout = _base_repo(fix, tmp_path_factory.mktemp(_case_id(fix)))
            if fix.fixture not in projects:
                data = tmp_path_factory.mktemp(f"ribbit-data-{fix.fixture}")
                projects[fix.fixture] = _ProjectRuns(data)
            project = projects[fix.fixture]
            run = GatesRun(checkout, FIXTURES / fix.fixture / fix.fix, fix.issue, project.data)
            project.runs.append(run)
            fixes[run] = fix
        for run, result in gates_side_by_side([p.runs for p in projects.values()]).items():
            reports[fixes[run]] = result

    def run(fix: RealFix) -> GatesResult:
        require_service(shutil.which("bwrap") is not None, "bubblewrap")
        require_service(shutil.which(fix.toolchain) is not None, fix.toolchain)
        if fix not in reports:
            judge_all((_selected(request.session) - reports.keys()) | {fix})
        return reports[fix]

    return run


def _tests_gate(report: dict[str, Any]) -> dict[str, Any]:
    return next(g for g in report["gates"] if g["name"] == "tests")


@pytest.mark.parametrize("fix", CORPUS, ids=_case_id)
def test_a_real_fix_is_verified_by_its_own_tests(fix: RealFix, judge: Judge) -> None:
    code, report = judge(fix)

    tests = _tests_gate(report)
    findings = _findings(report)
    assert code == 0, (report.get("verdict"), findings, tests.get("logs", "")[-3000:])
    # The fix's own tests, as the project's runner failed them outside Ribbit.
    assert fix.fail_to_pass <= set(tests["evidence"]), tests["evidence"]
    assert [f for f in findings if f["severity"] == "error"] == []
    assert [f for f in findings if "tamper" in f["rule"]] == []


@pytest.mark.parametrize(
    "fix",
    [fix for fix in CORPUS if fix.new_passing],
    ids=_case_id,
)
def test_a_new_test_that_passes_without_the_fix_is_no_evidence(fix: RealFix, judge: Judge) -> None:
    _, report = judge(fix)
    tests = _tests_gate(report)
    assert fix.new_passing & set(tests["evidence"]) == set(), tests["details"]["evidence"]


@pytest.mark.parametrize("fix", BASE_READS_FRAMES, ids=_case_id)
def test_a_real_fix_on_code_that_reads_frames_is_verified_with_a_warning(
    fix: RealFix, judge: Judge
) -> None:
    code, report = judge(fix)

    tests = _tests_gate(report)
    findings = _findings(report)
    assert code == 0, (report.get("verdict"), findings, tests.get("logs", "")[-3000:])
    assert fix.fail_to_pass <= set(tests["evidence"]), tests["evidence"]
    assert [f for f in findings if f["severity"] == "error"] == []
    # Only the base's own frame access, named where it happens, and never blocking.
    tamper = {(f["rule"], f["severity"], f["path"]) for f in findings if "tamper" in f["rule"]}
    expected = {("tamper-in-base", "warning", path) for path in fix.base_reads_frames_in}
    assert tamper == expected, findings
