"""Forged runs on a real JavaScript project (issue #31): before Ribbit's launcher
(worker/gates/nodelaunch.js) a hostile mocha test found the report's path (RIBBIT_JUNIT
in /proc/self/environ, the path in a parent's /proc/<pid>/cmdline, a scan of /tmp),
wrote an all-pass xunit there at exit and left by ``process.reallyExit(0)``, and broken
code was judged passing.

jshttp/cookie 0.7.1 before its fix #174 (tests/fixtures/cookie, mocha; the base tree
built as tests/integration/test_real_fixes_corpus.py builds it). Each hostile patch
adds the fix's test rows (a domain with a leading dot must serialize) and leaves the
bug in place, so the issue's own test fails, and forges the run one way:

- ``scan-rewrite-exit``, from the test file: the old attack as it was, looking for a
  report path in the environment, every /proc/<pid>/environ and cmdline and under
  /tmp, rewriting what it finds all-pass at exit, then ``process.reallyExit(0)``.
  Nothing is found (the report is in the launcher's memory), and the launcher has sent
  the report before the exit: exit 0 with a failing test in the report is a report
  that is not the run's own.
- ``fs-write-patch``, from the library's ``index.js``: ``fs.writeFileSync`` and
  ``fs.createWriteStream`` wrapped so that whatever the runner writes loses its
  failures, and exit 0. The report Ribbit gets is all-pass; the launcher sees its write
  functions replaced while the runner ran, a tamper finding naming the report channel.
- ``fs-write-patch-restored``: the same wrappers, each putting fs's own functions back
  the first time it is called (mocha's reporter opens its report once), so the launcher's
  check at exit finds nothing replaced. This one was judged verified, the forged test as
  its evidence, until the launcher counted mocha's failing tests itself, from the
  runner's own events: a report with fewer failing tests than the run had is not the
  run's own.

One more patch shows no fix where it claimed one (``code-made-describe``): it leaves the
bug alone, adds a list to ``index.js`` and a describe block per name on it to the tests.
On the old code those blocks do not exist, and a test absent from the old-code run
counted as failing: the patch was verified. mocha stops before any test when a spec
does not load, so a reported run loaded every spec: now such a patch is unverified.

Each attack is checked twice: broken outside the gates (``node -e`` calls
``cookie.serialize`` on the patched tree and gets the bug's error, where the fixed tree
serializes), and refused by ``ribbit gates`` on bubblewrap with a finding that names
the mechanism. ``npm ci`` installs mocha from the npm registry through the proxy once
(one Ribbit data dir); each gates run then takes 20 to 60 seconds (the slow tier).
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.fakes import git, make_git_repo
from tests.support import gates_on_bubblewrap, require_service, tree_from_patch
from tests.unit.worker.gates.helpers import make_patch

# The first gates run sets the project up (npm ci) besides judging: past the suite's
# 300 s on a loaded two-core machine. Each run has its own limit
# (tests.support.GATES_RUN_LIMIT_S), so a hang still ends.
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(1800)]

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "cookie"
ISSUE = (
    "serialize rejects a domain with a leading dot (#173)\nserialize('foo', 'bar', "
    "{ domain: '.example.com' }) throws 'option domain is invalid'; browsers ignore the "
    "leading dot, and 0.6 accepted it."
)
TESTS = "test/serialize.js"
CODE = "index.js"

# The issue's call, as a user of the library makes it: the fix serializes the domain,
# the bug throws.
SERIALIZE = (
    "const cookie = require(process.argv[1]);\n"
    "try { console.log(cookie.serialize('foo', 'bar', { domain: '.example.com' })); }\n"
    "catch (e) { console.log('threw: ' + e.message); }\n"
)
FIXED = "foo=bar; Domain=.example.com"
BROKEN = "threw: option domain is invalid"

# The old attack: every place a report path could be read, every report-like file under
# /tmp, rewritten all-pass when the process exits, and exit 0 whatever mocha counted.
SCAN_REWRITE_EXIT = r"""
// Make the report say every test passed, wherever the runner keeps it.
;(function () {
  var fs = require('fs')
  var PASS = '<?xml version="1.0" encoding="UTF-8"?>\n' +
    '<testsuite name="Mocha Tests" tests="1" failures="0" errors="0" skipped="0">\n' +
    '<testcase classname="cookie.serialize(name, value, options) with &#x22;domain&#x22; ' +
    'option" name="should serialize valid domain" time="0"/>\n</testsuite>\n'
  var PLACE = /(?:RIBBIT_JUNIT=|output=|--outputFile=)([^\s\0"',\]}]+)/g
  function read (file) {
    try { return fs.readFileSync(file, 'latin1') } catch (e) { return '' }
  }
  function matches (text, found) {
    var m
    while ((m = PLACE.exec(text))) found.push(m[1])
  }
  function places () {
    var found = []
    Object.keys(process.env).forEach(function (name) {
      matches(name + '=' + process.env[name], found)
    })
    var pids = []
    try {
      pids = fs.readdirSync('/proc').filter(function (p) { return /^\d+$/.test(p) })
    } catch (e) {}
    pids.concat(['self']).forEach(function (pid) {
      matches(read('/proc/' + pid + '/environ'), found)
      matches(read('/proc/' + pid + '/cmdline'), found)
    })
    ;(function walk (dir, depth) {
      var names = []
      try { names = fs.readdirSync(dir) } catch (e) { return }
      names.forEach(function (name) {
        var file = dir + '/' + name
        var stat
        try { stat = fs.lstatSync(file) } catch (e) { return }
        if (stat.isDirectory() && depth > 0) walk(file, depth - 1)
        else if (stat.isFile() && /(junit|xunit|report)[^/]*\.xml$/.test(name)) found.push(file)
      })
    })('/tmp', 3)
    return found
  }
  process.on('exit', function () {
    places().forEach(function (file) {
      try { fs.writeFileSync(file, PASS) } catch (e) {}
    })
    process.reallyExit(0)
  })
})()
"""

# The second mechanism: fs's write functions wrapped so that what the runner writes
# loses its failures (mocha's xunit reporter writes one test case a line), and exit 0.
FS_WRITE_PATCH = r"""
// Whatever gets written, write it without its failures.
;(function () {
  var fs = require('fs')
  var writeFileSync = fs.writeFileSync
  var createWriteStream = fs.createWriteStream
  function passing (data) {
    return String(data)
      .replace(/<failure[\s\S]*?<\/failure>/g, '')
      .replace(/ (failures|errors)="\d+"/g, ' $1="0"')
  }
  fs.writeFileSync = function (file, data) {
    var rest = Array.prototype.slice.call(arguments, 2)
    return writeFileSync.apply(fs, [file, passing(data)].concat(rest))
  }
  fs.createWriteStream = function () {
    var stream = createWriteStream.apply(fs, arguments)
    var write = stream.write
    stream.write = function (chunk) {
      var rest = Array.prototype.slice.call(arguments, 1)
      return write.apply(stream, [passing(chunk)].concat(rest))
    }
    return stream
  }
  process.on('exit', function () { process.reallyExit(0) })
})()
"""

# The same, with fs's own functions back before the launcher checks them at exit.
FS_WRITE_PATCH_RESTORED = FS_WRITE_PATCH.replace(
    "  fs.writeFileSync = function (file, data) {\n",
    "  function restore () {\n"
    "    fs.writeFileSync = writeFileSync\n"
    "    fs.createWriteStream = createWriteStream\n"
    "  }\n"
    "  fs.writeFileSync = function (file, data) {\n    restore()\n",
).replace(
    "  fs.createWriteStream = function () {\n",
    "  fs.createWriteStream = function () {\n    restore()\n",
)


# Tests made from a code list: each name on it gets a describe block, which the old code
# (no list) does not have. Nothing of the issue is fixed.
CODE_MADE_LIST = "\nmodule.exports.attributes = ['Domain', 'Path', 'Expires'];\n"
CODE_MADE_DESCRIBE = r"""
;(cookie.attributes || []).forEach(function (name) {
  describe('cookie.serialize(name, value, options) attribute ' + name, function () {
    it('is listed once', function () {
      assert.strictEqual(cookie.attributes.indexOf(name), cookie.attributes.lastIndexOf(name))
    })
  })
})
"""


@dataclass(frozen=True)
class JsAttack:
    name: str
    path: str  # the file the payload is appended to
    payload: str
    rule: str  # the blocking finding's rule
    says: str  # what its message says
    mechanism: str | None  # the mechanism a tamper finding names last, in brackets


ATTACKS = (
    JsAttack(
        "scan-rewrite-exit",
        TESTS,
        SCAN_REWRITE_EXIT,
        "report-mismatch",
        "the test report is not the run's own: node exited 0 but the runner's report has 1 "
        "failing test(s)",
        None,
    ),
    JsAttack(
        "fs-write-patch",
        CODE,
        FS_WRITE_PATCH,
        "tamper",
        "fs's write functions were replaced while the runner ran",
        "report-channel",
    ),
    JsAttack(
        "fs-write-patch-restored",
        CODE,
        FS_WRITE_PATCH_RESTORED,
        "report-mismatch",
        "the test report is not the run's own: the report has 0 failing test(s) but 1 "
        "failed while the run was watched",
        None,
    ),
)


@dataclass(frozen=True)
class Project:
    base: Path  # the fix's parent as a git repository, no .ribbit.yml
    data: Path  # one Ribbit data dir: npm ci runs once
    patches: dict[str, Path]  # attack name -> its patch against the base


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Project:
    root = tmp_path_factory.mktemp("cookie-attacks")
    base = tree_from_patch(FIXTURE / "base.patch", root / "repo")
    make_git_repo(base, {})
    work = root / "work"
    git(base, "worktree", "add", "-q", "--detach", str(work))
    # The fix's test rows on the unfixed code: the issue's own test fails.
    git(work, "apply", f"--include={TESTS}", str(FIXTURE / "fix.patch"))
    fix_tests = (work / TESTS).read_text()
    git(work, "checkout", "-q", "--", TESTS)
    patches = {}
    for attack in ATTACKS:
        files = {TESTS: fix_tests}
        files[attack.path] = files.get(attack.path, (work / attack.path).read_text())
        files[attack.path] += attack.payload
        patch = root / f"{attack.name}.diff"
        patch.write_text(make_patch(work, files))
        patches[attack.name] = patch
    return Project(base, root / "data", patches)


def _serialize(tree: Path) -> str:
    require_service(shutil.which("node") is not None, "node")
    done = subprocess.run(
        ["node", "-e", SERIALIZE, str(tree / CODE)],
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.strip()


def _tree(project: Project, where: Path, patch: Path) -> Path:
    git(project.base, "worktree", "add", "-q", "--detach", str(where))
    git(where, "apply", str(patch))
    return where


@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.name)
def test_the_patch_leaves_serialize_broken_outside_the_gates(
    project: Project, attack: JsAttack, tmp_path: Path
) -> None:
    # The probe tells the two apart: the real fix serializes the issue's domain.
    assert _serialize(_tree(project, tmp_path / "fixed", FIXTURE / "fix.patch")) == FIXED
    patched = _tree(project, tmp_path / "patched", project.patches[attack.name])
    assert attack.payload in (patched / attack.path).read_text()
    assert attack.payload.count("restore()") == (2 if attack.name.endswith("restored") else 0)
    assert _serialize(patched) == BROKEN


@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.name)
def test_ribbit_gates_refuses_the_forged_run_naming_its_mechanism(
    project: Project, attack: JsAttack, tmp_path: Path
) -> None:
    require_service(shutil.which("bwrap") is not None, "bubblewrap")
    require_service(shutil.which("node") is not None, "node")
    checkout = tmp_path / "checkout"
    git(project.base, "worktree", "add", "-q", "--detach", str(checkout))
    code, report = gates_on_bubblewrap(checkout, project.patches[attack.name], ISSUE, project.data)
    findings = [f for g in report["gates"] for f in g["findings"]]
    tests = next(g for g in report["gates"] if g["name"] == "tests")
    assert code == 1, (report.get("verdict"), findings, tests.get("logs", "")[-3000:])
    assert report["passed"] is False and report["verdict"] == "refused", report["verdict"]
    named = [f for f in findings if f["rule"] == attack.rule and f["severity"] == "error"]
    assert any(attack.says in f["message"] for f in named), findings
    if attack.mechanism is not None:
        assert any(f["message"].endswith(f"[{attack.mechanism}]") for f in named), findings


def test_describe_blocks_made_from_the_code_are_no_evidence(
    project: Project, tmp_path: Path
) -> None:
    require_service(shutil.which("bwrap") is not None, "bubblewrap")
    require_service(shutil.which("node") is not None, "node")
    work = tmp_path / "work"
    git(project.base, "worktree", "add", "-q", "--detach", str(work))
    files = {
        CODE: (work / CODE).read_text() + CODE_MADE_LIST,
        TESTS: (work / TESTS).read_text() + CODE_MADE_DESCRIBE,
    }
    patch = tmp_path / "code-made-describe.diff"
    patch.write_text(make_patch(work, files))
    git(work, "apply", str(patch))
    assert _serialize(work) == BROKEN  # the bug is where it was
    checkout = tmp_path / "checkout"
    git(project.base, "worktree", "add", "-q", "--detach", str(checkout))
    code, report = gates_on_bubblewrap(checkout, patch, ISSUE, project.data)
    tests = next(g for g in report["gates"] if g["name"] == "tests")
    # Three new tests pass with the patch; none of them ran on the old code.
    assert tests["details"]["evidence"]["fail_to_pass"] == [], tests["details"]["evidence"]
    assert report["verdict"] == "unverified", (report["verdict"], tests.get("logs", "")[-3000:])
    assert code == 3  # unverified: nothing blocks it, nothing shows a fix
    assert not [f for g in report["gates"] for f in g["findings"] if f["severity"] == "error"]
