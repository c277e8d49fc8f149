"""The watched pytest run's doors to pytest's objects guarded, inside the sandbox.

The code under test reaches none of pytest's objects through the garbage collector or
frames without the audit hook reporting it, but pytest leaves its config, session and
plugin manager in plain sight: the assertion rewriter in ``sys.meta_path`` (also every
rewritten module's ``__loader__``) holds the config and the session; ``pytest.mark``
and ``_pytest.debugging.pytestPDB`` hold the config (the latter the plugin manager
too); ``_pytest.assertion.util._config`` holds it while a test runs. Through the plugin
manager, code under test could unregister Ribbit's plugins, swap a hook
implementation's function, and reach the bootstrap's own closures, its channel's key
among them, with no audit event at all.

So each of those references is replaced by a guard once pytest has set it (before the
first conftest, after configure, as collection starts, as each test is set up): an
object that
forwards attribute access to the one it stands for and records ``runner-reach`` where
the repository's non-test code asked (the first frame out from the guard's caller that
is not the standard library's, which acts for its caller: ``string.Formatter`` or
``inspect`` fetching an attribute is its caller's doing). A guard forwards no dunder
attribute but ``__class__`` (no copy or pickle of what it guards). The guarded object
is kept in a suspended generator's frame, reached only through ``gi_frame`` (which the
audit hook reports) or the generator itself, which records a caller that is not one
of the guards' methods; the methods have globals of their own and hold only that
generator's ``send``, so neither the object nor the bootstrap's functions can be taken
from them.

What is not guarded: pytest's own helpers that fetch an attribute for their caller
(``_pytest.compat.safe_getattr``) hand on what they fetch; objects pytest passes to
test code (``request.config``), which test code may pass on.

:func:`worker.gates.watch.bootstrap_source` puts this module's code in place of
watchboot's import of it (see :mod:`worker.gates.watchchannel`). It imports nothing
from Ribbit: it runs in the repository's interpreter.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

Record = Callable[[str, str, "str | None", int], None]
# The repository's non-test file and line that asked, from a frame out (or None).
Where = Callable[[Any], "tuple[str, int] | None"]
Guard = Callable[[Any, str], Any]


def _repo_spot(
    frame: Any, repo_file: Callable[[str], str | None], test_path: Any
) -> tuple[str, int] | None:
    """The non-test workspace file and line ``frame`` runs, or None (the audit hook's
    attribution in watchboot ends here too)."""
    if frame is None:
        return None
    rel = repo_file(frame.f_code.co_filename)
    if rel is None or test_path.search(rel):
        return None
    return rel, frame.f_lineno


def _asker(repo_file: Callable[[str], str | None], test_path: Any) -> Where:
    """``where(frame)``: walks out past the standard library's frames (taken now, before
    any repository code runs) to the first other frame; its file and line where that
    is a non-test file of the workspace."""
    import sysconfig

    paths = sysconfig.get_paths()
    stdlib = paths["stdlib"].rstrip("/") + "/"
    # Installed packages (pytest among them) may live under the standard library's
    # folder (site-packages): theirs are not the standard library's frames.
    installed = tuple({paths["purelib"].rstrip("/") + "/", paths["platlib"].rstrip("/") + "/"})

    def standard(name: str) -> bool:
        if name.startswith("<frozen "):
            return True
        if "/site-packages/" in name or "/dist-packages/" in name:
            return False  # a base environment's packages, under a virtual one
        return name.startswith(stdlib) and not name.startswith(installed)

    def where(frame: Any) -> tuple[str, int] | None:
        while frame is not None and standard(frame.f_code.co_filename):
            frame = frame.f_back
        return _repo_spot(frame, repo_file, test_path)

    return where


def _keeper(real: Any, what: str, record: Record, where: Where, own: set[Any]) -> Any:
    """The generator that holds ``real``: sent ``(op, name, value)`` by a guard's method
    (one of the ``own`` code objects), it does the operation on ``real`` for the
    method's caller, recording the caller where the repository asked; anyone else who
    sends to it is recorded and gets nothing."""
    getframe = sys._getframe
    get, put, drop, shown = getattr, setattr, delattr, repr
    answer: tuple[BaseException | None, Any] = (None, None)
    while True:
        op, name, value = yield answer
        answer = (None, None)
        caller = getframe(1)
        if caller.f_code not in own:
            asked = where(caller)
            path, line = asked if asked is not None else (None, 0)
            record("runner-reach", f"Ribbit's guard of pytest's {what} called", path, line)
            continue
        reached = where(caller.f_back)
        if reached is not None:
            record("runner-reach", f"pytest's {what} reached (.{name})", *reached)
        # What the operation raises goes back to the guard to raise: raised here, it
        # would end the generator, and the guard with it (hasattr of a missing name).
        try:
            if op == "get":
                answer = (None, get(real, name))
            elif op == "set":
                put(real, name, value)
            elif op == "del":
                drop(real, name)
            else:
                answer = (None, shown(real))
        except Exception as error:  # the guard raises it for its caller
            answer = (error, None)


def _guard(real: Any, what: str, record: Record, where: Where) -> Any:
    """A guard of ``real`` (see the module's docstring)."""
    import builtins
    import types

    def attr(self: Any, name: str) -> Any:
        if name[:2] == "__" and name[-2:] == "__" and name != "__class__":
            raise AttributeError(name)
        error, value = send(("get", name, None))
        if error is not None:
            raise error
        return value

    def set_attr(self: Any, name: str, value: Any) -> None:
        error, _ = send(("set", name, value))
        if error is not None:
            raise error

    def del_attr(self: Any, name: str) -> None:
        error, _ = send(("del", name, None))
        if error is not None:
            raise error

    def shown(self: Any) -> Any:
        error, value = send(("repr", None, None))
        if error is not None:
            raise error
        return value

    send: Any = None
    # A method's globals hold nothing of the bootstrap's: what it raises, no more.
    isolated: dict[str, Any] = {"__builtins__": {"AttributeError": AttributeError}}
    methods = {
        m.__name__: types.FunctionType(m.__code__, isolated, m.__name__, None, m.__closure__)
        for m in (attr, set_attr, del_attr, shown)
    }
    keeper = _keeper(real, what, record, where, {m.__code__ for m in methods.values()})
    next(keeper)
    send = keeper.send
    namespace = {
        "__slots__": (),
        "__getattribute__": methods["attr"],
        "__setattr__": methods["set_attr"],
        "__delattr__": methods["del_attr"],
        "__repr__": methods["shown"],
    }
    return builtins.type(f"Guarded{builtins.type(real).__name__}", (), namespace)()


def _guarding(record: Record, where: Where) -> Guard:
    """``guard(real, what)``: the one guard of ``real`` (made on first use); a guard
    itself, or None, is returned as it is."""
    made: dict[int, Any] = {}
    guards: set[int] = set()

    def guard(real: Any, what: str) -> Any:
        if real is None or id(real) in guards:
            return real
        if id(real) not in made:
            made[id(real)] = _guard(real, what, record, where)
            guards.add(id(made[id(real)]))
        return made[id(real)]

    return guard


def _guard_doors(guard: Guard) -> None:
    """Every door pytest has opened by now guarded: the assertion rewriter's config and
    session (``sys.meta_path``; pytest sets the session as collection starts),
    ``pytest.mark``'s and ``pytestPDB``'s config and plugin manager (set in pytest's
    configure), and ``_pytest.assertion.util._config`` (set for each test)."""
    for hook in list(sys.meta_path):
        state: Any = getattr(hook, "__dict__", None)
        if type(hook).__name__ == "AssertionRewritingHook" and state is not None:
            for name in ("config", "session"):
                if state.get(name) is not None:
                    state[name] = guard(state[name], name)
    generator = getattr(sys.modules.get("_pytest.mark.structures"), "MARK_GEN", None)
    if generator is not None and getattr(generator, "_config", None) is not None:
        generator._config = guard(generator._config, "config")
    pdb = getattr(sys.modules.get("_pytest.debugging"), "pytestPDB", None)
    for name, what in (("_config", "config"), ("_pluginmanager", "plugin manager")):
        if pdb is not None and getattr(pdb, name, None) is not None:
            setattr(pdb, name, guard(getattr(pdb, name), what))
    util = sys.modules.get("_pytest.assertion.util")
    if util is not None and vars(util).get("_config") is not None:
        vars(util)["_config"] = guard(vars(util)["_config"], "config")
