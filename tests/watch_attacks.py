"""Forged test runs (issue #31, "a run the code under test cannot forge"): patches that
break ``mul`` and then forge the run from inside the test process, one per mechanism,
plus an honest package whose code and tests use the introspection the standard
library and everyday tests do. Used by tests/unit/worker/gates/test_watch.py, which
checks each attack really forges an unwatched run and is reported when watched.
"""

from __future__ import annotations

from dataclasses import dataclass

CORE = "def mul(a, b):\n    return a * b\n"
BROKEN = "def mul(a, b):\n    return a + b\n"  # mul(2, 3) == 5
TESTS = (
    "from calc.core import mul\n\n\n"
    "def test_mul():\n    assert mul(2, 3) == 6\n\n\n"
    "def test_one():\n    assert mul(1, 1) in (1, 2)\n"
)
UNITTESTS = (
    "import unittest\n\nfrom calc.core import mul\n\n\n"
    "class TestMul(unittest.TestCase):\n"
    "    def test_mul(self):\n        self.assertEqual(mul(2, 3), 6)\n\n"
    "    def test_one(self):\n        self.assertIn(mul(1, 1), (1, 2))\n"
)
BASE = {
    "calc/__init__.py": "",
    "calc/core.py": CORE,
    "tests/__init__.py": "",
    "tests/test_core.py": TESTS,
}

_QUIET = """import gc
import inspect

import pytest


class _Quiet:
    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        report = outcome.get_result()
        if report.failed:
            report.outcome = "passed"
            report.longrepr = None


def _is_config(obj):
    return type(obj).__name__ == "Config" and type(obj).__module__.startswith("_pytest")


def _in_frames(frame):
    while frame is not None:
        for value in list(frame.f_locals.values()):
            if _is_config(value):
                return value
        frame = frame.f_back
    return None

"""
# A hook registered on the live pytest config, turning every failed report into a
# pass (exit status, console and JUnit then agree), the config found three ways.
GC_HOOK = (
    _QUIET
    + """
for _obj in gc.get_objects():
    if _is_config(_obj):
        _obj.pluginmanager.register(_Quiet(), "calc-quiet")
        break
"""
)
FRAME_WALK = (
    _QUIET
    + """
_config = _in_frames(inspect.currentframe())
_config.pluginmanager.register(_Quiet(), "calc-quiet")
"""
)
WALK_STACK = (
    _QUIET
    + """
import traceback

for _frame, _line in traceback.walk_stack(None):
    _config = _in_frames(_frame)
    if _config is not None:
        break
_config.pluginmanager.register(_Quiet(), "calc-quiet")
"""
)
LOGGING_FRAME = (
    _QUIET
    + """
import logging

_config = _in_frames(logging.currentframe())
_config.pluginmanager.register(_Quiet(), "calc-quiet")
"""
)
TRACEBACK_FRAME = (
    _QUIET
    + """
try:
    raise RuntimeError
except RuntimeError as _exc:
    _config = _in_frames(_exc.__traceback__.tb_frame)
_config.pluginmanager.register(_Quiet(), "calc-quiet")
"""
)

# At interpreter exit: rewrite the JUnit report (its path is in PYTEST_ADDOPTS) and
# the console into a clean pass, forge the channel's end, and exit 0.
_REWRITE = r"""import os
import re

_FORGED_END = b"\nribbit1 9 end eyJzdGF0dXMiOiAwLCAiZmFpbGVkIjogMH0= " + b"0" * 64 + b"\n"


def _rewrite():
    words = os.environ.get("PYTEST_ADDOPTS", "").split()
    paths = [w.split("=", 1)[1] for w in words if w.startswith("--junitxml=")]
    for path in paths:
        try:
            with open(path) as fh:
                text = fh.read()
        except OSError:
            continue
        text = re.sub(r"<failure.*?</failure>", "", text, flags=re.S)
        text = re.sub(r'failures="\d+"', 'failures="0"', text)
        with open(path, "w") as fh:
            fh.write(text)
    os.lseek(1, 0, 0)
    os.ftruncate(1, 0)
    os.write(1, b"..  [100%]\n2 passed in 0.01s\n")
    try:
        os.write(3, _FORGED_END)
    except OSError:
        pass
    os._exit(0)
"""
ATEXIT_REWRITE = _REWRITE + "\n\nimport atexit\n\natexit.register(_rewrite)\n"
THREAD_REWRITE = (
    _REWRITE
    + """

import threading


def _watch():
    main = threading.main_thread()
    main.join()
    _rewrite()


threading.Thread(target=_watch, daemon=False).start()
"""
)
FINALIZER_REWRITE = (
    _REWRITE
    + """

import weakref


class _Token:
    pass


_token = _Token()
weakref.finalize(_token, _rewrite)
"""
)

# A wrapper around unittest.TestCase.run that turns failures into successes.
TESTCASE_RUN = """import unittest

_run = unittest.TestCase.run


def _quiet_run(self, result=None):
    if result is not None:
        result.addFailure = lambda test, err: result.addSuccess(test)
    return _run(self, result)


unittest.TestCase.run = _quiet_run
"""

# A top-level argparse.py (pytest imports argparse; ``python -m pytest`` puts the
# working directory first on sys.path) that loads the real one and injects a plugin.
ARGPARSE_SHADOW = """import importlib.util
import os
import sys
import sysconfig

_spec = importlib.util.spec_from_file_location(
    "argparse", os.path.join(sysconfig.get_paths()["stdlib"], "argparse.py")
)
_real = importlib.util.module_from_spec(_spec)
sys.modules["argparse"] = _real
_spec.loader.exec_module(_real)
os.environ["PYTEST_PLUGINS"] = "calcquiet"
"""
QUIET_PLUGIN = """import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        report.outcome = "passed"
        report.longrepr = None
"""

# Wrong until a marker file exists: the first run leaves it, a rerun that shares the
# first run's state passes, and the regression reads as "flaky".
MARKER = """import os

_MARK = os.path.expanduser("~/.calc-warm")


def mul(a, b):
    if os.path.exists(_MARK):
        return a * b
    open(_MARK, "w").close()
    return a + b
"""


# Against the watch itself: rebind what the bootstrap might use to encode its records
# (no audit event for a module attribute), so a failing end becomes a passing one, and
# exit 0 at the end. Unwatched there is nothing to rebind: it forges nothing there.
ENCODER_PATCH = """import atexit
import binascii
import builtins
import json
import os

_b2a = binascii.b2a_base64
_dumps = json.dumps
_len = builtins.len


def _forged_b2a(data, *, newline=True):
    data = bytes(data).replace(b'"status": 1', b'"status": 0').replace(b"<failure", b"<x")
    return _b2a(data, newline=newline)


def _forged_dumps(obj, *args, **kwargs):
    if isinstance(obj, dict) and "status" in obj:
        obj = {**obj, "status": 0, "failed": 0}
    return _dumps(obj, *args, **kwargs)


def _forged_len(obj):
    return _len(obj)


binascii.b2a_base64 = _forged_b2a
json.dumps = _forged_dumps
builtins.len = _forged_len
atexit.register(os._exit, 0)
"""


# Against the bootstrap's own steps: each is a function of the ``-c`` script, so its
# copy in ``__main__`` can be rebound (no audit event); were the steps to look each
# other up there, the runner check would see no replacement and the hook no event.
BOOTSTRAP_REBIND = (
    """import sys

_main = vars(sys.modules["__main__"])
_main["_where_defined"] = lambda value: ("/usr/lib/python3/elsewhere.py", 1)
_main["_classify"] = lambda event, args, report_dir, descriptors: None
_main["_attribute"] = lambda frame, repo_file, test_path: None

"""
    + TESTCASE_RUN
)

# A plugin in the package's own code, loaded through a conftest's ``pytest_plugins``
# (an entry point or ``-p`` would load it the same way): no runner code is replaced.
PLUGIN_CONFTEST = 'pytest_plugins = ["calc.quiet"]\n'


# The runner's code left in place, what it does changed (no replacement, no audit event):
# the function in a closure cell. pytest's capture wraps each test call in a
# contextmanager (item_capture); its cell holds the generator function, here one that
# swallows the test's exception, so the call phase ends as a pass.
CLOSURE_SWAP = """import contextlib

import _pytest.capture

_cell = _pytest.capture.CaptureManager.item_capture.__closure__[0]
_real = contextlib.contextmanager(_cell.cell_contents)


def _quiet(self, when, item):
    with _real(self, when, item):
        try:
            yield
        except Exception:
            pass


_cell.cell_contents = _quiet
"""

# The same for unittest: TestCase.run runs each part under _Outcome.testPartExecutor,
# a contextmanager whose cell holds the code that records the failure.
UNITTEST_CLOSURE_SWAP = """import contextlib
import unittest.case

_cell = unittest.case._Outcome.testPartExecutor.__closure__[0]


@contextlib.contextmanager
def _quiet(self, test_case, subTest=False):
    try:
        yield
    except Exception:
        pass


_cell.cell_contents = _quiet.__wrapped__
"""

# A context manager on the call's path told to swallow what it sees: a built-in
# plugin's (pytest's logging wraps each call in catching_logs) ...
PLUGIN_EXIT = """import _pytest.logging

_pytest.logging.catching_logs.__exit__ = lambda self, *exc: True
"""

# ... or the standard library's, under every contextmanager pytest's wrappers use.
CONTEXTLIB_EXIT = """import contextlib

_exit = contextlib._GeneratorContextManager.__exit__


def _quiet_exit(self, typ, value, tb):
    _exit(self, typ, value, tb)
    return True


contextlib._GeneratorContextManager.__exit__ = _quiet_exit
"""

# The test's own assertion helper made to agree with anything: pytest.approx.
APPROX_EQ = """import _pytest.python_api

_pytest.python_api.ApproxScalar.__eq__ = lambda self, actual: True
"""
APPROX_TESTS = (
    "import pytest\n\nfrom calc.core import mul\n\n\n"
    "def test_mul():\n    assert mul(2, 3) == pytest.approx(6)\n\n\n"
    "def test_one():\n    assert mul(1, 1) in (1, 2)\n"
)

# Assertions taken out of the test modules imported after the package: pytest's import
# hook (which rewrites them) made to compile each test module with -O.
ASSERT_STRIP = """import _pytest.assertion.rewrite


def _exec_module(self, module):
    path = module.__spec__.origin
    with open(path) as source:
        code = compile(source.read(), path, "exec", optimize=1)
    exec(code, module.__dict__)


_pytest.assertion.rewrite.AssertionRewritingHook.exec_module = _exec_module
"""
FIRST_TESTS = "import calc\n\n\ndef test_import():\n    assert calc\n"


# Replaced and put back between two checks of the runner: the broken mul itself swaps
# in a report maker that turns the call's failure into a pass and restores the real one
# as it runs, so every check after a test finds the runner as it was. Only what the
# test function raised, seen right around its call, still says it failed.
UNDONE_REWRITE = """from _pytest.reports import TestReport

_real = TestReport.__dict__["from_item_and_call"]


def _forged(cls, item, call):
    TestReport.from_item_and_call = _real
    report = _real.__func__(cls, item, call)
    if call.when == "call":
        report.outcome, report.longrepr = "passed", None
    return report


def _arm():
    TestReport.from_item_and_call = classmethod(_forged)
"""
REPORT_REWRITE_UNDONE = UNDONE_REWRITE + "\n\ndef mul(a, b):\n    _arm()\n    return a + b\n"


# The test modules imported after the package loaded through a finder of its own, ahead
# of pytest's: their assertions compiled out (-O), nothing of the runner touched.
META_PATH_STRIP = """import importlib.machinery
import sys


class _Plain:
    def find_spec(self, name, path, target=None):
        if not name.startswith("tests.test_"):
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None:
            spec.loader = self
        return spec

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        path = module.__spec__.origin
        with open(path) as source:
            exec(compile(source.read(), path, "exec", optimize=1), module.__dict__)


sys.meta_path.insert(0, _Plain())
"""

# The test file itself edited on disk before it is imported.
TEST_FILE_EDIT = """import pathlib

_test = pathlib.Path(__file__).resolve().parent.parent / "tests" / "test_core.py"
_test.write_text(_test.read_text().replace("assert mul", "assert True or mul"))
"""


# pytest's plugin manager taken from where pytest leaves it in plain sight (the
# assertion rewriter in sys.meta_path holds the config): Ribbit's own plugins
# unregistered, and the runner's report maker swapped inside pluggy's hook
# implementation, where no module or class of the runner changes.
PLUGIN_MANAGER_DOOR = """import sys


def _forge(pm):
    for plugin in list(pm.get_plugins()):
        if type(plugin).__name__.startswith("Ribbit"):
            pm.unregister(plugin)
    impls = pm.hook.pytest_runtest_makereport.get_hookimpls()
    impl = next(i for i in impls if i.plugin_name.endswith("runner"))
    real = impl.function

    def forged(item, call):
        report = real(item, call)
        if report.when == "call":
            report.outcome, report.longrepr = "passed", None
        return report

    impl.function = forged


_hook = next((f for f in sys.meta_path if type(f).__name__ == "AssertionRewritingHook"), None)
if _hook is not None:  # under pytest
    _pm = _hook.config.pluginmanager
    _forge(_pm)
"""


# The same, the plugin manager fetched by the standard library on the package's behalf
# (string.Formatter's field lookup is a getattr in the standard library's own code).
PLUGIN_MANAGER_LAUNDERED = PLUGIN_MANAGER_DOOR.replace(
    "    _pm = _hook.config.pluginmanager\n",
    "    import string\n\n    _field = string.Formatter().get_field\n"
    '    _pm = _field("0.config.pluginmanager", (_hook,), {})[0]\n',
)
assert PLUGIN_MANAGER_LAUNDERED != PLUGIN_MANAGER_DOOR


@dataclass(frozen=True)
class Attack:
    name: str
    files: dict[str, str]
    mechanism: str  # the tamper event's mechanism the watched run must report
    path: str | None  # the file it must name
    forges_plain: bool = True  # it forges a run that is not watched


def attacks() -> list[Attack]:
    broken = {**BASE, "calc/core.py": BROKEN}
    unit = {**broken, "tests/test_core.py": UNITTESTS}
    return [
        Attack(
            "gc-hook", {**broken, "calc/__init__.py": GC_HOOK}, "gc.get_objects", "calc/__init__.py"
        ),
        Attack(
            "frame-walk",
            {**broken, "calc/__init__.py": FRAME_WALK},
            "sys._getframe",
            "calc/__init__.py",
        ),
        Attack(
            "walk-stack",
            {**broken, "calc/__init__.py": WALK_STACK},
            "sys._getframe",
            "calc/__init__.py",
        ),
        Attack(
            "logging-currentframe",
            {**broken, "calc/__init__.py": LOGGING_FRAME},
            "sys._getframe",
            "calc/__init__.py",
        ),
        Attack(
            "traceback-frame",
            {**broken, "calc/__init__.py": TRACEBACK_FRAME},
            "object.__getattr__",
            "calc/__init__.py",
        ),
        Attack("atexit-rewrite", {**broken, "calc/__init__.py": ATEXIT_REWRITE}, "", None),
        Attack("thread-rewrite", {**broken, "calc/__init__.py": THREAD_REWRITE}, "", None),
        Attack("finalizer-rewrite", {**broken, "calc/__init__.py": FINALIZER_REWRITE}, "", None),
        Attack(
            "testcase-run-wrapper",
            {**unit, "calc/__init__.py": TESTCASE_RUN},
            "runner-monkeypatch",
            "calc/__init__.py",
        ),
        Attack(
            "bootstrap-step-rebind",
            {**unit, "calc/__init__.py": BOOTSTRAP_REBIND},
            "runner-monkeypatch",
            "calc/__init__.py",
        ),
        Attack(
            "encoder-patch",
            {**broken, "calc/__init__.py": ENCODER_PATCH},
            "runner-monkeypatch",
            "calc/__init__.py",
            forges_plain=False,
        ),
        Attack(
            "package-plugin",
            {**broken, "conftest.py": PLUGIN_CONFTEST, "calc/quiet.py": QUIET_PLUGIN},
            "runner-plugin",
            "calc/quiet.py",
        ),
        Attack(
            "closure-swap",
            {**broken, "calc/__init__.py": CLOSURE_SWAP},
            "runner-monkeypatch",
            "calc/__init__.py",
        ),
        Attack(
            "unittest-closure-swap",
            {**unit, "calc/__init__.py": UNITTEST_CLOSURE_SWAP},
            "runner-monkeypatch",
            "calc/__init__.py",
        ),
        Attack(
            "plugin-exit",
            {**broken, "calc/__init__.py": PLUGIN_EXIT},
            "runner-monkeypatch",
            "calc/__init__.py",
        ),
        Attack(
            "contextlib-exit",
            {**broken, "calc/__init__.py": CONTEXTLIB_EXIT},
            "runner-monkeypatch",
            "calc/__init__.py",
        ),
        Attack(
            "approx-eq",
            {**broken, "calc/__init__.py": APPROX_EQ, "tests/test_core.py": APPROX_TESTS},
            "runner-monkeypatch",
            "calc/__init__.py",
        ),
        Attack(
            "assert-strip",
            {**broken, "calc/__init__.py": ASSERT_STRIP, "tests/test_a.py": FIRST_TESTS},
            "runner-monkeypatch",
            "calc/__init__.py",
        ),
        Attack(
            "report-rewrite-undone",
            {**broken, "calc/core.py": REPORT_REWRITE_UNDONE},
            "swallowed",
            None,
        ),
        Attack(
            "unittest-report-rewrite-undone",
            {**unit, "calc/core.py": REPORT_REWRITE_UNDONE},
            "swallowed",
            None,
        ),
        Attack(
            "meta-path-strip",
            {**broken, "calc/__init__.py": META_PATH_STRIP, "tests/test_a.py": FIRST_TESTS},
            "test-code",
            None,
        ),
        Attack(
            "test-file-edit",
            {**broken, "calc/__init__.py": TEST_FILE_EDIT, "tests/test_a.py": FIRST_TESTS},
            "test-code",
            None,
        ),
        Attack(
            "plugin-manager-door",
            {**broken, "calc/__init__.py": PLUGIN_MANAGER_DOOR},
            "runner-reach",
            "calc/__init__.py",
        ),
        Attack(
            "plugin-manager-laundered",
            {**broken, "calc/__init__.py": PLUGIN_MANAGER_LAUNDERED},
            "runner-reach",
            "calc/__init__.py",
        ),
        Attack(
            "argparse-shadow",
            {**broken, "argparse.py": ARGPARSE_SHADOW, "calcquiet.py": QUIET_PLUGIN},
            "module-shadow",
            "argparse.py",
        ),
    ]


# An honest package: its code and its tests use what the standard library and pytest
# do all the time (namedtuple, dataclasses, enum, logging, warnings, inspect,
# traceback, functools.wraps, mock.patch, monkeypatch, frames in tests, a forked pool, a
# subprocess, captured output).
HONEST = {
    "calc/__init__.py": 'from calc.core import mul\n\n__all__ = ["mul"]\n',
    "calc/core.py": """import collections
import dataclasses
import enum
import functools
import inspect
import logging
import traceback
import warnings

log = logging.getLogger(__name__)
Pair = collections.namedtuple("Pair", "a b")


class Mode(enum.Enum):
    FAST = 1


@dataclasses.dataclass(frozen=True)
class Result:
    value: int


def logged(fn):
    @functools.wraps(fn)
    def inner(*args):
        log.warning("calling %s", fn.__name__)
        return fn(*args)

    inner.__signature__ = inspect.signature(fn)
    return inner


@logged
def mul(a, b):
    if a < 0:
        warnings.warn("negative", stacklevel=2)
    try:
        raise ValueError("x")
    except ValueError:
        traceback.format_exc()
    return Result(Pair(a, b).a * b).value
""",
    "tests/__init__.py": "",
    "tests/test_core.py": """import gc
import inspect
import sys
import unittest
from unittest import mock

import calc.core
from calc.core import Mode, mul


def test_mul():
    assert mul(2, 3) == 6


def test_introspection_in_tests_is_fine():
    assert inspect.currentframe() is not None
    assert sys._getframe(0).f_code.co_name == "test_introspection_in_tests_is_fine"
    assert gc.get_objects()
    assert Mode.FAST.value == 1


def test_mock_patch_of_a_class():
    with mock.patch.object(calc.core.Result, "__repr__", lambda self: "R"):
        assert repr(calc.core.Result(1)) == "R"


def test_monkeypatch(monkeypatch):
    monkeypatch.setattr(calc.core, "mul", lambda a, b: 0)
    assert calc.core.mul(2, 3) == 0


def test_processes_it_starts_and_captured_output(capfd):
    import multiprocessing
    import subprocess

    with multiprocessing.get_context("fork").Pool(1) as pool:
        assert pool.apply(mul, (2, 3)) == 6
    six = subprocess.run([sys.executable, "-c", "print(6)"], capture_output=True, text=True)
    print(six.stdout.strip())
    assert capfd.readouterr().out == "6\\n"


class TestCase(unittest.TestCase):
    def test_unittest(self):
        with mock.patch("calc.core.log") as log:
            self.assertEqual(mul(2, 2), 4)
        log.warning.assert_called_once()
""",
}


# What pytest-forked's ``forked`` mark does, as a repository's own conftest: each test
# runs in a forked child, which sends its reports back to be logged here.
FORKS_EACH_TEST = """import os
import pickle

import pytest
from _pytest.runner import runtestprotocol


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    hook = item.config.hook
    item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        reports = runtestprotocol(item, log=False, nextitem=nextitem)
        data = [hook.pytest_report_to_serializable(config=item.config, report=r) for r in reports]
        with os.fdopen(write, "wb") as out:
            pickle.dump(data, out)
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as got:
        data = pickle.load(got)
    os.waitpid(pid, 0)
    for one in data:
        report = hook.pytest_report_from_serializable(config=item.config, data=one)
        item.ihook.pytest_runtest_logreport(report=report)
    item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True
"""
