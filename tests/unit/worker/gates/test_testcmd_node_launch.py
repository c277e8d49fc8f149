"""jest and mocha through Ribbit's launcher (worker/gates/nodelaunch.js), run for real by
node against stand-in runner packages: the runner is told Ribbit's report options, the
tests' ``process.argv`` is what the plain command gives them (issue #35: commander.js's
own tests parse it and fail on ``--ci``), no Ribbit variable is left for them, and the
report reaches Ribbit only over the launcher's signed channel on fd 3 (issue #31): no
path a test could find by the environment, /proc or /tmp, and a second write is tamper.
mocha's failing tests are counted from its runner and sent with the channel's end, so a
report rewritten on its way out has fewer failures than the run."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from tests.support import require_service
from worker.gates.testcmd import Invocation, recognise
from worker.gates.watch import Channel, channel_tamper, parse_channel

# The place the launcher tells the runner: a name under /proc/self nothing can create.
REPORT = "/proc/self/ribbit-report"

# A stand-in runner: records what it was told and what its process looks like, writes
# the report where its options say, and exits as a failing run would.
_RECORDER = r"""
const fs = require('fs');
function record(args) {
  const out = args.find((a) => a.startsWith('--outputFile=') || a.startsWith('output='));
  fs.writeFileSync('seen.json', JSON.stringify({
    argv: process.argv.slice(1), args,
    ribbit: Object.keys(process.env).filter((k) => k.startsWith('RIBBIT_')),
    // No report path where a test could read it: its own and its parent's environment
    // and command line (what the kernel shows, whatever process.env now says).
    environ: [`/proc/self/environ`, `/proc/${process.ppid}/environ`,
      `/proc/${process.ppid}/cmdline`].some((f) =>
      /RIBBIT_JUNIT|\/tmp\/ribbit-report/.test(fs.readFileSync(f, 'latin1'))),
    nodeEnv: process.env.NODE_ENV || null,
  }));
  if (out) fs.writeFileSync(out.split('=').slice(1).join('='), 'report');
  if (process.env.WRITE_TWICE) fs.createWriteStream(REPORT_AGAIN).end('forged');
  process.exitCode = 3;
}
const REPORT_AGAIN = '/proc/self/ribbit-report';
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


def _run(
    how: Invocation, workspace: Path, extra: dict[str, str] | None = None
) -> tuple[subprocess.CompletedProcess[str], Channel | None]:
    """Run ``how`` as the run wrapper does for a launched runner (fd 3 its channel) and
    return the process and what the channel said."""
    require_service(shutil.which("node") is not None, "node")
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", **(extra or {})}
    read, write = os.pipe()
    try:
        done = subprocess.run(
            ["bash", "--noprofile", "--norc", "-c", f'exec 3>&{write}; eval "$0"', how.script],
            cwd=workspace,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            pass_fds=(write,),
        )
    finally:
        os.close(write)
    with os.fdopen(read, "rb") as channel:
        text = channel.read().decode()
    return done, parse_channel(text)


def test_jest_is_told_its_report_options_while_the_tests_argv_stays_plain(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    _package(workspace, "jest", "index.js", "exports.run = record;")
    how = recognise("npx jest --coverage", ".ribbit.yml").invocation(["a.test.js::math adds"])
    done, channel = _run(how, workspace)
    assert done.returncode == 3, done.stderr
    seen = json.loads((workspace / "seen.json").read_text())
    assert seen["argv"] == [str(workspace / "node_modules/.bin/jest"), "--coverage"]
    assert seen["args"] == [
        "--coverage",
        *("--ci", "--json", f"--outputFile={REPORT}"),
        *("--testNamePattern=^(math adds)$", "a.test.js"),
    ]
    assert seen["ribbit"] == [] and not seen["environ"] and seen["nodeEnv"] == "test"
    assert channel is not None and channel.broken is None and channel.events == ()
    assert channel.report == b"report" and how.report_expected and how.flavour == "jest"
    assert how.channel and not Path(REPORT).exists()
    # The log says what jest was told, and what the tests see.
    assert how.ran.startswith("jest --coverage --ci --json '--outputFile=<in-memory>'")
    assert "process.argv is node node_modules/.bin/jest --coverage" in how.ran


def test_mocha_in_a_test_script_reports_through_its_xunit_reporter(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "package.json").write_text('{"scripts": {"test": "mocha test/"}}')
    _package(workspace, "mocha", "lib/cli/cli.js", "exports.main = record;")
    test = recognise("npm test", ".ribbit.yml", workspace)
    assert (test.runner, test.command, test.args) == ("mocha", "npm test", ("test/",))
    how = test.invocation(["dates::parse reads one", "::at the top"])
    done, channel = _run(how, workspace)
    assert done.returncode == 3, done.stderr
    seen = json.loads((workspace / "seen.json").read_text())
    assert seen["argv"] == [str(workspace / "node_modules/.bin/mocha"), "test/"]
    assert seen["args"] == [
        "test/",
        *("--reporter", "xunit", "--reporter-option", f"output={REPORT}"),
        *("--grep", "^(at the top|dates parse reads one)$"),
    ]
    assert seen["ribbit"] == [] and not seen["environ"]
    assert channel is not None and channel.report == b"report" and channel.events == ()


def test_a_second_write_to_the_report_is_tamper_on_the_channel(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    _package(workspace, "mocha", "lib/cli/cli.js", "exports.main = record;")
    how = recognise("npx mocha", ".ribbit.yml").invocation()
    done, channel = _run(how, workspace, {"WRITE_TWICE": "1"})
    assert done.returncode == 3, done.stderr
    assert channel is not None and channel.broken is None
    assert [e.what for e in channel.events] == ["the report was written more than once"]
    assert channel.report == b"forged"  # sent, but the tamper record blocks the run


def test_a_runner_that_is_not_installed_says_so(tmp_path: Path) -> None:
    how = recognise("npx jest", ".ribbit.yml").invocation()
    done, channel = _run(how, tmp_path)
    assert done.returncode == 97 and channel is not None and channel.report is None
    assert "node_modules/.bin/jest not found: is the set-up run (npm ci)?" in done.stderr


# A stand-in mocha whose runner fails one test twice (done() called twice) and a hook,
# and whose reporter writes a report that has no failures at all.
_MOCHA_RUNNER = r"""
const { EventEmitter } = require('events');
class Runner extends EventEmitter {
  run(done) {
    const suite = { fullTitle: () => 'dates' };
    const test = { type: 'test', title: 'parse reads one', parent: suite };
    this.emit('fail', test, new Error('no'));
    this.emit('fail', test, new Error('done() called multiple times'));
    this.emit('fail', { type: 'hook', title: '"after each" hook', parent: suite }, new Error());
    done(1);
  }
}
module.exports = Runner;
"""
_MOCHA_CLI = r"""
const fs = require('fs');
const Runner = require('../runner.js');
exports.main = (args) => {
  const out = args.find((a) => a.startsWith('output=')).slice('output='.length);
  new Runner().run((failures) => {
    fs.writeFileSync(out, '<testsuite tests="1" failures="0"></testsuite>');
    process.exitCode = failures;
  });
};
"""


def test_mochas_failing_tests_are_counted_from_its_runner_in_the_end_record(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    _package(workspace, "mocha", "lib/cli/cli.js", "")
    mocha = workspace / "node_modules" / "mocha" / "lib"
    (mocha / "cli" / "cli.js").write_text(_MOCHA_CLI)
    (mocha / "runner.js").write_text(_MOCHA_RUNNER)
    done, channel = _run(recognise("npx mocha", ".ribbit.yml").invocation(), workspace)
    assert done.returncode == 1, done.stderr
    assert channel is not None and channel.broken is None and channel.events == ()
    # One test, however often it failed; the hook is not counted (its title moves).
    assert channel.failed == 1
    assert channel_tamper(channel, 0, 0, "the runner's run") is not None
    assert channel_tamper(channel, 1, 1, "the runner's run") is None
