"""jest and mocha through Ribbit's launcher (worker/gates/nodelaunch.js), run for real by
node against stand-in runner packages: the runner is told Ribbit's report options, the
tests' ``process.argv`` is what the plain command gives them (issue #35: commander.js's
own tests parse it and fail on ``--ci``), and no Ribbit variable is left for them."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from tests.support import require_service
from worker.gates.testcmd import Invocation, recognise

# A stand-in runner: records what it was told and what its process looks like, writes
# the report where its options say, and exits as a failing run would.
_RECORDER = """
const fs = require('fs');
function record(args) {
  const out = args.find((a) => a.startsWith('--outputFile=') || a.startsWith('output='));
  fs.writeFileSync('seen.json', JSON.stringify({
    argv: process.argv.slice(1), args,
    ribbit: Object.keys(process.env).filter((k) => k.startsWith('RIBBIT_')),
    nodeEnv: process.env.NODE_ENV || null,
  }));
  if (out) fs.writeFileSync(out.split('=').slice(1).join('='), 'report');
  process.exitCode = 3;
}
"""


def _package(root: Path, name: str, entry: str, exports: str) -> None:
    package = root / "node_modules" / name
    (package / "bin").mkdir(parents=True)
    (package / "package.json").write_text(json.dumps({"name": name, "main": "index.js"}))
    (package / "bin" / f"{name}.js").write_text("// the binary; the launcher skips it\n")
    (package / entry).parent.mkdir(parents=True, exist_ok=True)
    (package / entry).write_text(_RECORDER + exports)
    (root / "node_modules" / ".bin").mkdir(exist_ok=True)
    (root / "node_modules" / ".bin" / name).symlink_to(f"../{name}/bin/{name}.js")


def _run(how: Invocation, workspace: Path, report: Path) -> subprocess.CompletedProcess[str]:
    require_service(shutil.which("node") is not None, "node")
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "RIBBIT_JUNIT": str(report)}
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-c", how.script],
        cwd=workspace,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_jest_is_told_its_report_options_while_the_tests_argv_stays_plain(tmp_path: Path) -> None:
    workspace, report = tmp_path / "ws", tmp_path / "report.json"
    workspace.mkdir()
    _package(workspace, "jest", "index.js", "exports.run = record;")
    how = recognise("npx jest --coverage", ".ribbit.yml").invocation(["a.test.js::math adds"])
    done = _run(how, workspace, report)
    assert done.returncode == 3, done.stderr
    seen = json.loads((workspace / "seen.json").read_text())
    assert seen["argv"] == [str(workspace / "node_modules/.bin/jest"), "--coverage"]
    assert seen["args"] == [
        "--coverage",
        *("--ci", "--json", f"--outputFile={report}"),
        *("--testNamePattern=^(math adds)$", "a.test.js"),
    ]
    assert seen["ribbit"] == [] and seen["nodeEnv"] == "test"
    assert report.read_text() == "report" and how.report_expected and how.flavour == "jest"
    # The log says what jest was told, and what the tests see.
    assert how.ran.startswith("jest --coverage --ci --json '--outputFile=$RIBBIT_JUNIT'")
    assert "process.argv is node node_modules/.bin/jest --coverage" in how.ran


def test_mocha_in_a_test_script_reports_through_its_xunit_reporter(tmp_path: Path) -> None:
    workspace, report = tmp_path / "ws", tmp_path / "report.xml"
    workspace.mkdir()
    (workspace / "package.json").write_text('{"scripts": {"test": "mocha test/"}}')
    _package(workspace, "mocha", "lib/cli/cli.js", "exports.main = record;")
    test = recognise("npm test", ".ribbit.yml", workspace)
    assert (test.runner, test.command, test.args) == ("mocha", "npm test", ("test/",))
    how = test.invocation(["dates::parse reads one", "::at the top"])
    done = _run(how, workspace, report)
    assert done.returncode == 3, done.stderr
    seen = json.loads((workspace / "seen.json").read_text())
    assert seen["argv"] == [str(workspace / "node_modules/.bin/mocha"), "test/"]
    assert seen["args"] == [
        "test/",
        *("--reporter", "xunit", "--reporter-option", f"output={report}"),
        *("--grep", "^(at the top|dates parse reads one)$"),
    ]
    assert seen["ribbit"] == [] and report.read_text() == "report"


def test_a_runner_that_is_not_installed_says_so(tmp_path: Path) -> None:
    how = recognise("npx jest", ".ribbit.yml").invocation()
    done = _run(how, tmp_path, tmp_path / "report.json")
    assert done.returncode == 97
    assert "node_modules/.bin/jest not found: is the set-up run (npm ci)?" in done.stderr
