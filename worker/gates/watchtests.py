"""The watched pytest run's test code held to its files, inside the sandbox.

A test that must fail can be made to pass without touching the runner: by loading its
module from other code than its file holds (an import hook or finder the repository's
code adds, a forged ``.pyc``, the assertions compiled out) or by editing the file on
disk before it is imported. The witness (watchboot's ``_witness``) sees what a test
function raised; it cannot see an assertion that was never compiled. So the test code
is checked against its source:

- before any repository code runs, every test file of the workspace is noted (its
  inode and change time, which no process can set back);
- when collection ends, every module loaded from a test file is compared with that
  file compiled afresh, the way pytest's assertion rewriting compiles it or plainly:
  each function and method its namespace holds whose code names that file must be one
  of the fresh compile's (by its bytecode, names and constants, whatever its name or
  line). A file changed since it was noted is recorded as such.

Both are ``test-code`` records. A function whose code was built at run time with the
file's name (an ``exec`` in a test module) shows as one; a test module imported again
later (``importlib.reload``) is checked as collection left it.

:func:`worker.gates.watch.bootstrap_source` puts this module's code in place of
watchboot's import of it (see :mod:`worker.gates.watchchannel`). It imports nothing
from Ribbit: it runs in the repository's interpreter.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

Record = Callable[[str, str, "str | None", int], None]
Noted = dict[str, tuple[int, int]]  # a test file's path -> (inode, change time in ns)


def _note_test_files(workspace: str, test_path: Any) -> Noted:
    """Every ``.py`` test file under ``workspace`` (hidden folders, virtual
    environments and installed packages left out), with its inode and change time."""
    import os

    noted: Noted = {}
    skipped = ("node_modules", "__pycache__", "site-packages", "dist-packages")
    for top, dirs, files in os.walk(workspace):
        dirs[:] = [
            d
            for d in dirs
            if not d.startswith(".")
            and d not in skipped
            and not os.path.exists(os.path.join(top, d, "pyvenv.cfg"))
        ]
        for name in files:
            if not name.endswith(".py"):
                continue
            path = os.path.join(top, name)
            rel = path[len(workspace) :]
            if test_path.search(rel):
                try:
                    st = os.stat(path)
                except OSError:
                    continue
                noted[rel] = (st.st_ino, st.st_ctime_ns)
    return noted


def _constant(value: Any) -> object:
    """A code object's constant as it compares: a nested code object by its signature,
    a frozenset whatever order its elements come in (a ``.pyc`` written by another
    process, with another hash seed, stores them in another order), else its repr."""
    if hasattr(value, "co_code"):
        return _signature(value)
    if isinstance(value, tuple):
        return ("tuple", *(_constant(v) for v in value))
    if isinstance(value, frozenset):
        return ("frozenset", *sorted(repr(_constant(v)) for v in value))
    return (type(value).__name__, repr(value))


def _signature(code: Any) -> tuple[object, ...]:
    """What a code object does: its bytecode, names, flags and constants (a nested code
    object by its own signature), not where it is or what it is called."""
    consts = tuple(_constant(c) for c in code.co_consts)
    return (
        code.co_code,
        code.co_names,
        code.co_varnames,
        code.co_freevars,
        code.co_cellvars,
        code.co_flags,
        consts,
    )


def _all_codes(code: Any) -> list[Any]:
    found = [code]
    for c in code.co_consts:
        if hasattr(c, "co_code"):
            found += _all_codes(c)
    return found


def _functions_in(module: Any, filename: str) -> list[Any]:
    """The code of every function and method in ``module``'s namespace whose code was
    compiled from ``filename`` (decorators' wrappers followed to what they wrap)."""
    values = list(vars(module).values())
    for value in list(values):
        if isinstance(value, type):
            values += list(vars(value).values())
    codes: list[Any] = []
    for value in values:
        fn = getattr(value, "__func__", value)  # staticmethod, classmethod
        for _ in range(8):
            code: Any = getattr(fn, "__code__", None)
            if hasattr(code, "co_code") and code.co_filename == filename:
                codes.append(code)
            fn = getattr(fn, "__wrapped__", None)
            if fn is None:
                break
    return codes


def _test_code_checker(
    record: Record, workspace: str, test_path: Any, noted: Noted
) -> Callable[[Any], None]:
    """``check_test_code(config)``, run when collection ends (see the module's
    docstring). What it calls is taken now, before any repository code runs."""
    import ast
    import os

    from _pytest.assertion.rewrite import rewrite_asserts

    parse, compile_, stat = ast.parse, compile, os.stat

    def fresh(source: bytes, filename: str, config: Any, rewritten: bool) -> set[object]:
        try:
            if rewritten:
                tree = parse(source, filename=filename)
                rewrite_asserts(tree, source, filename, config)
                code = compile_(tree, filename, "exec", dont_inherit=True)
            else:
                code = compile_(source, filename, "exec", dont_inherit=True)
        except (SyntaxError, ValueError):
            return set()
        return {_signature(c) for c in _all_codes(code)}

    def check_test_code(config: Any) -> None:
        for module in list(sys.modules.values()):
            filename = str(getattr(module, "__file__", None) or "")
            if not filename.startswith(workspace) or not filename.endswith(".py"):
                continue
            rel = filename[len(workspace) :]
            if not test_path.search(rel):
                continue
            try:
                st = stat(filename)
                with open(filename, "rb") as file:
                    source = file.read()
            except OSError:
                continue
            if noted.get(rel) != (st.st_ino, st.st_ctime_ns):
                what = f"the test file {rel} was changed or made while the tests ran"
                record("test-code", what, None, 0)
                continue
            codes = _functions_in(module, filename)
            kinds = [fresh(source, filename, config, True)]
            for code in codes:
                if _signature(code) in kinds[0]:
                    continue
                if len(kinds) == 1:
                    kinds.append(fresh(source, filename, config, False))
                if _signature(code) not in kinds[1]:
                    where = f"{rel}:{code.co_firstlineno}"
                    what = f"the code of {code.co_name} ({where}) is not what its file compiles to"
                    record("test-code", what, None, 0)

    return check_test_code
