"""The watched pytest run's witness, inside the sandbox: what each test function raised,
seen right around its call.

The runner's snapshot (:mod:`worker.gates.watchrunner`) is compared after each test; a
report turned into a pass by code the code under test swapped in, and put back before
the next check, leaves nothing there to compare. What the test function itself raised
is seen before any of the layers outside it (pytest's wrappers, its context managers,
its report maker) can act, so a call that raised whose call phase reports a pass is
recorded as ``swallowed`` however the pass was made.

:func:`worker.gates.watch.bootstrap_source` puts this module's code in place of
watchboot's import of it (see :mod:`worker.gates.watchchannel`). It imports nothing
from Ribbit: it runs in the repository's interpreter.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Record = Callable[[str, str, "str | None", int], None]


def _witness(record: Record) -> object:
    """A pytest plugin that sees what each test function raised, right around its call,
    so that nothing the code under test does to the layers outside it (a context
    manager's exit that swallows the exception, a report turned into a pass and the
    change undone before the next check) can unsee it: a call that raised whose call
    phase reports a pass is recorded as ``swallowed``. For a function, the innermost
    ``pytest_pyfunc_call`` wrapper; for a unittest method (pytest calls those through
    unittest's own machinery, not that hook), a wrapper in the method's place for its
    call. The last call counts, where a plugin retries within the phase."""
    import pytest

    raised: dict[str, str] = {}
    wrap_unittest = _unittest_witness(raised)

    class RibbitWitness:
        @staticmethod
        @pytest.hookimpl(hookwrapper=True, trylast=True)  # innermost: right around the call
        def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> Any:
            outcome = yield
            excinfo = getattr(outcome, "excinfo", None)
            if excinfo is None:
                raised.pop(pyfuncitem.nodeid, None)
            else:
                raised[pyfuncitem.nodeid] = type(excinfo[1]).__name__

        @staticmethod
        @pytest.hookimpl(hookwrapper=True)
        def pytest_runtest_call(item: pytest.Item) -> Any:
            restore = wrap_unittest(item)
            yield
            restore()

        @staticmethod
        def pytest_runtest_logreport(report: pytest.TestReport) -> None:
            kind = raised.pop(report.nodeid, None) if report.when == "call" else None
            if kind is not None and report.passed:
                what = f"{report.nodeid} raised {kind} in its call, yet reports a pass"
                record("swallowed", what, None, 0)

    return RibbitWitness()


def _unittest_witness(raised: dict[str, str]) -> Callable[[Any], Callable[[], None]]:
    """``wrap_unittest``: puts a wrapper that notes what the call raised in ``raised`` in
    a unittest item's method's place (as pytest's ``--trace`` wraps it) and returns
    what undoes it. What it calls is taken now, before any repository code runs.
    Coroutine methods are left alone (what they raise happens after the call)."""
    import functools
    import inspect

    update_wrapper = functools.update_wrapper
    is_coroutine = inspect.iscoroutinefunction
    unittest_item: Any
    try:
        from _pytest.unittest import TestCaseFunction as unittest_item
    except ImportError:
        unittest_item = None

    def nothing() -> None:
        return None

    def wrap_unittest(item: Any) -> Callable[[], None]:
        if unittest_item is None or not isinstance(item, unittest_item):
            return nothing
        method = item.obj
        if not callable(method) or is_coroutine(method):
            return nothing
        nodeid = item.nodeid

        def called(*args: Any, **kwargs: Any) -> Any:
            try:
                result = method(*args, **kwargs)
            except BaseException as exc:
                raised[nodeid] = type(exc).__name__
                raise
            raised.pop(nodeid, None)
            return result

        item.obj = update_wrapper(called, method)

        def restore() -> None:
            item.obj = method

        return restore

    return wrap_unittest
