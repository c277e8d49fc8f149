"""Evidence that a patch fixes something: the one fail-to-pass judge.

A patch is *verified* only when at least one test fails (or cannot load: its module does
not import or build) on the base code with the patch's own test files, and passes with
the whole patch; a test id that only the patch's code brings into being shows nothing.
Both the test gate (worker/gates/tests.py) and the environment builder
(trainer/envs/builder.py) judge with :func:`fail_to_pass`, and split a patch's test
files from its code with :func:`is_test_file`, so a solve job's "verified" and a training
environment's FAIL_TO_PASS mean the same thing.

"Not run" is never evidence: a test skipped or xfailed with the patch is not a pass, and
a test that already passed on the base code shows nothing. The levels themselves
(verified, unverified, refused) are :class:`bot.store.records.gate_report.Verdict`.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from worker.gates.hygiene import is_test_path
from worker.gates.rusttests import only_test_changes
from worker.gates.trees import PatchTrees, applied_changes, regular_file_inside

# What a test may have done without the patch's code for its pass with it to count:
# failed or errored (a new test that imports what the fix adds errors at collection).
# Skipped is not failing: a test the base code skips showed nothing there.
_FAILING = frozenset({"failed", "error"})
# What the gate writes for a test absent from a run (judge.py's ``_without``): not a result.
ABSENT = "absent"


def fail_to_pass(
    without: Mapping[str, str],
    with_patch: Mapping[str, str],
    *,
    flaky: Collection[str] = (),
    runner: str = "",
) -> list[str]:
    """The test ids that pass with the patch and failed or errored without its code (the
    patch's own tests present in both runs), or were absent there because their module
    could not load (:func:`could_not_load`), sorted. Outcomes are by test id, which names
    a test uniquely (class and parametrisation included); a flaky test is no evidence
    either way. ``runner``: the test command's runner (worker.gates.testcmd.Runner),
    which says how a module that does not load shows in its report."""
    return sorted(
        test
        for test, outcome in with_patch.items()
        if outcome == "passed" and _failed_without(test, without, runner) and test not in flaky
    )


def _failed_without(test: str, without: Mapping[str, str], runner: str) -> bool:
    outcome = without.get(test)
    return could_not_load(test, without, runner) if outcome is None else outcome in _FAILING


# Node's test runner reports a test file that does not load as one failing case named
# by the file's absolute path (its ids carry no file: ``suite > test``).
_NODE_FILE = re.compile(r"/.+\.[cm]?[jt]sx?")


def could_not_load(test: str, without: Mapping[str, str], runner: str = "") -> bool:
    """Whether ``test``, absent from the run ``without`` (outcomes by id), is absent
    because its own module could not be loaded there: then it failed there, as a new
    test that imports what the fix adds does. Absence alone is not failing: a test id
    decided by the code (a ``parametrize`` row or ``ids=`` taken from the code, tests
    generated from a code list) exists only with the patch's code while its module ran
    fine without it, and its pass shows no fix.

    The module is the id's part before ``::`` (pytest's file, go test's package, a
    libtest target, jest's and vitest's file, mocha's describe blocks). It did not load
    when the run reports it failing as a whole (:func:`_whole_unit_failed`: pytest's
    collection error of it, of a package above it or of a class or function collector
    above the test; jest's broken file; vitest's ``<file>::<file>``), or, for runners
    that report nothing of a unit that does not build (a Go package, a Rust target),
    when no test of it ran at all. pytest reports every module it cannot collect, so for
    pytest a module without tests is one that loaded.

    mocha's ids are ``<describe blocks>::<title>`` (its xunit reporter names no file):
    a spec file that does not load stops mocha before any test runs, with no report, so
    a reported run loaded every file, and a test absent from it was brought by the code
    (a describe block or a title taken from it, or from a loop over it): never failing.
    Node's test runner names no file in its ids (``suite > test``) and reports a file
    that does not load as a failing case named by its path: an absent test counts as
    failing only when some file of the run did not load. Where the runner is not known
    (``runner`` empty), a mocha-shaped id whose describe block ran nowhere counts as
    failing, as a Go package that did not build does."""
    if runner == "mocha":
        return False
    ran = [t for t, o in without.items() if o != ABSENT]
    if runner == "node":
        return any(_NODE_FILE.fullmatch(t) and without[t] in _FAILING for t in ran)
    module, sep, _ = test.partition("::")
    if not sep:
        return True
    if any(_whole_unit_failed(test, module, t, without[t]) for t in ran):
        return True
    if module.endswith(".py"):
        return False
    return not any(t.startswith(module + "::") for t in ran)


def _whole_unit_failed(test: str, module: str, entry: str, outcome: str) -> bool:
    """Whether the failing result ``entry`` is ``test``'s unit failing as a whole:
    jest's file (its path), vitest's file that did not load (``<file>::<file>``),
    pytest's collection error (the dotted path of the module or of a package above it,
    ``tests.sub`` for ``tests/sub/__init__.py``; a class or function collector above the
    test, ``tests/test_x.py::TestC`` erroring in ``pytest_generate_tests``)."""
    if outcome not in _FAILING:
        return False
    if "::" in entry:
        return entry == f"{module}::{module}" or test.startswith((entry + "::", entry + "["))
    if entry == module:
        return True
    dotted = module.removesuffix(".py").replace("/", ".")
    unit = entry.removesuffix(".__init__")
    return dotted == unit or dotted.startswith(unit + ".")


def is_test_file(path: str) -> bool:
    """Whether ``path`` holds tests, so it belongs to the patch's test part: SWE-bench's
    rule of thumb (a test folder, ``test_*``/``*_test(s).py``, ``conftest.py``) and the
    gates' own (``*_test.go``, ``*.test.ts``/``*.spec.js``, ``spec/``, ``__tests__/``).
    A test file left on the code side would be absent from the base run, and any test
    in it would count as failing there."""
    p = PurePosixPath(path)
    if any(part in {"test", "tests", "testing"} for part in p.parts[:-1]):
        return True
    name = p.name
    return (
        name.startswith("test_")
        or name.endswith(("_test.py", "_tests.py"))
        or name == "conftest.py"
        or is_test_path(path)
    )


@contextmanager
def base_with_patch_tests(trees: PatchTrees) -> Iterator[Path | None]:
    """A copy of the base tree with every test file as the patch leaves it (added,
    changed, or removed where the patch deletes it): the patch's own tests against the
    old code, as the environment builder runs base + test_patch. None when the patch
    touches no test file, so the base tree itself is that tree."""
    changes = applied_changes(trees.after)
    tests = [c.path for c in changes if is_test_file(c.path)]
    # Rust's unit tests share files with the code: only their own changes come along.
    inline = {
        c.path: text
        for c in changes
        if c.status == "M" and c.path.endswith(".rs") and not is_test_file(c.path)
        for text in [_rust_tests_only(trees, c.path)]
        if text is not None
    }
    with _overlaid(trees.before, trees.after, tests, "ribbit-evidence-", inline) as tree:
        yield tree


def _rust_tests_only(trees: PatchTrees, path: str) -> str | None:
    before, after = regular_file_inside(trees.before, path), regular_file_inside(trees.after, path)
    if before is None or after is None:
        return None
    try:
        return only_test_changes(before.read_text("utf-8"), after.read_text("utf-8"))
    except (OSError, UnicodeDecodeError):
        return None


@contextmanager
def patched_code_with_base_tests(trees: PatchTrees) -> Iterator[Path | None]:
    """A copy of the patched tree with every test file the patch changes or deletes as
    the base has it (issue #38): the repository's own tests, its specification before the
    patch, against the patched code. None when the patch changes or deletes no test file
    (the tests it leaves alone already ran as they are)."""
    tests = [
        c.path for c in applied_changes(trees.after) if is_test_file(c.path) and c.status != "A"
    ]
    with _overlaid(trees.after, trees.before, tests, "ribbit-pinned-") as tree:
        yield tree


@contextmanager
def _overlaid(
    start: Path,
    source: Path,
    paths: list[str],
    prefix: str,
    rewritten: Mapping[str, str] | None = None,
) -> Iterator[Path | None]:
    """A temporary copy of ``start`` with each of ``paths`` as ``source`` has it (removed
    where ``source`` has none) and each of ``rewritten`` with the text given; None, and
    no copy, when there is nothing to change."""
    if not paths and not rewritten:
        yield None
        return
    root = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        tree = root / "tree"
        shutil.copytree(start, tree, symlinks=True)
        for path in paths:
            _copy_as_after(source, tree, path)
        for path, text in (rewritten or {}).items():
            # Only a regular file inside the copy: never through a link of the base's.
            target = regular_file_inside(tree, path)
            if target is not None:
                target.write_text(text, encoding="utf-8")
        yield tree
    finally:
        shutil.rmtree(root, ignore_errors=True)


@dataclass(frozen=True)
class BehaviourChange:
    """A base test that passed on the base code and fails with the patch's, which the
    patch also edits: the lines it removes from the test and the lines it adds, for the
    reviewer to read side by side (issue #38)."""

    test: str  # the test id
    old: tuple[str, ...]
    new: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"test": self.test, "old": list(self.old), "new": list(self.new)}

    @classmethod
    def from_dict(cls, data: Any) -> BehaviourChange | None:
        """A stored one; None when it is not one."""
        if not isinstance(data, dict) or not isinstance(data.get("test"), str):
            return None

        def lines(key: str) -> tuple[str, ...]:
            value = data.get(key)
            return tuple(x for x in value if isinstance(x, str)) if isinstance(value, list) else ()

        return cls(data["test"], lines("old"), lines("new"))


def _copy_as_after(after: Path, tree: Path, rel: str) -> None:
    """``tree/rel`` made what ``after/rel`` is (``after``: the tree to copy from): a
    regular file (mode kept), a symlink (as a link, never followed on the host), or
    nothing."""
    source, target = after / rel, tree / rel
    existing = target.parent
    while not existing.exists() and existing != tree:
        existing = existing.parent
    if not existing.resolve().is_relative_to(tree.resolve()):
        return  # through a symlink of the base's: nothing on the host outside the copy
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.is_symlink() or target.is_file():
        target.unlink()
    elif target.is_dir():
        shutil.rmtree(target)
    if source.is_symlink():
        os.symlink(os.readlink(source), target)
    elif source.is_file():
        shutil.copy2(source, target, follow_symlinks=False)
