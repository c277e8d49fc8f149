"""The gates a candidate patch must pass before it becomes a draft PR: the tests
(in a sandbox, before and after), Semgrep (new findings only) and patch hygiene.

- base.py: what every gate takes (:class:`GateContext`) and returns; runner.py: every gate
  on one patch; trees.py: the before and after trees they compare; patch.py: the diff
  parsed into what they judge.
- tests.py: the test gate, over testrun.py (the one test runner, also the trainer's),
  testcmd.py (which command, and how it is asked for per-test results; nodelaunch.js,
  run inside the sandbox, starts jest and mocha with Ribbit's options out of the tests'
  process.argv) and junit.py (the one JUnit reader); targets.py: the tests a patch is
  about, per language; judge.py: the runs compared before and after, test by test;
  pinned.py: the base's tests of the files a patch edits, run on the patched code (issue
  #38); evidence.py: the one fail-to-pass judge (verified only when a test fails on the
  old code with the patch's tests and passes with the patch), also the environment
  builder's, with rusttests.py for Rust's unit tests, which share files with the code;
  watch.py runs plain pytest watched (watchboot.py, the bootstrap run inside the
  sandbox, with watchchannel.py, its keyed channel and sealed report, watchcopies.py,
  where copies of the repository's code are installed, watchrunner.py, its snapshot of
  the runner's code, watchtests.py, the test code held to its files, watchwitness.py,
  what each test function raised, and watchguard.py, the guards on pytest's objects
  left in plain sight, inlined into it); startup.py compares what the test interpreter
  runs before the bootstrap, and the workspace a run starts with, with the base's run
  and the tree (startupscan.py, read inside the sandbox with ``python -I -S``);
  and tamper.py turns what they saw into findings;
  basesetup.py: the base's set-up, once, that every test run outside a job starts from
  (``ribbit gates``, the grader).
- semgrep.py with rules/: new security findings; hygiene.py with discovery.py: what a
  patch must never touch (CI, the gates' configuration, how tests are found or run),
  secrets.py: the secrets an added line appears to hold; weakened.py: tests deleted,
  skipped, loosened or their report rewritten;
  autorun.py: files that run without anyone asking (scripts CI runs, install hooks,
  editor auto-run files, package indexes); source.py: a changed file read as the
  interpreter reads it (coding declarations, bidi controls), with probes.py: code that
  probes whether it is judged, and test code that rebinds the code under test.
- verdict.py: what the test gate's result means for the people reading the issue, the
  pull request and ``ribbit gates`` (a broken base, the evidence, the target tests, how
  the results were read); review.py: findings as annotations on the pull request's
  lines; cli.py: ``ribbit gates``.
"""

from __future__ import annotations

from bot.store.records.gate_report import Finding, GateReport, GateResult
from worker.gates.base import Gate, GateContext
from worker.gates.runner import run_gates

__all__ = [
    "Finding",
    "Gate",
    "GateContext",
    "GateReport",
    "GateResult",
    "default_gates",
    "run_gates",
]


def default_gates(ctx: GateContext) -> list[Gate]:
    """The gates every patch goes through, in report order."""
    from worker.gates.hygiene import HygieneGate
    from worker.gates.semgrep import SemgrepGate
    from worker.gates.tests import TestGate

    return [TestGate(), SemgrepGate(), HygieneGate()]
