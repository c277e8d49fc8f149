"""The watched pytest run's step 4, inside the sandbox: the runner's code held still.

What decides a test's outcome is code outside the test: pytest (every module of it,
its built-in plugins included: capture and logging wrap each call), pluggy, unittest,
the installed plugins' modules, the standard library's ``contextlib`` that their
wrappers run through, and the builtins. A class attribute or module attribute
assignment raises no audit event, and neither does changing what a function does
while leaving the function in place: the function in one of its closure cells (a
``contextmanager``'s generator), its defaults, its attributes. So every module of those
packages is snapshotted before the repository's code can run (pytest's built-in
plugins imported for it; installed plugins when pytest has loaded them, before the
first conftest), a module of theirs loaded later when the check first sees it, and
after each test and at the end each entry is compared by identity:

- every callable a module defines and every method (static, class, property) of its
  classes;
- for each such function: its attributes and what each closure cell holds (a function
  found there is followed the same way). Its code, defaults and keyword defaults are
  the audit hook's: replacing them, or taking the keyword defaults to change in place,
  raises an event, which it reports for the runner's functions (reading them after
  each test would raise thousands).

A change is the repository's doing where the new value's code is in a non-test file of
the workspace or nowhere Python can tell (data, a builtin); plugins and pytest patch
its classes as they load, from their own files. Mutating an object the runner holds
(a dict's items where no entry names them, an instance's attributes: the assertion
rewriter in ``sys.meta_path``, pluggy's hook implementations) is not seen, nor is a
change undone before the next check; the witness (:mod:`worker.gates.watchwitness`)
stands behind both for what decides a test's outcome, the report of a test function
that raised.

:func:`worker.gates.watch.bootstrap_source` puts this module's code in place of
watchboot's import of it (see :mod:`worker.gates.watchchannel`). It imports nothing
from Ribbit: it runs in the repository's interpreter.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

Record = Callable[[str, str, "str | None", int], None]
RepoFile = Callable[[str], "str | None"]
# (what holds it, where in it, the value it had, its name, how to read it): a mapping
# and a key (0), or a closure cell and None (1).
Entry = tuple[Any, Any, object, str, int]


def _function_entries(
    fn: Any, shown: str, depth: int, seen: set[int], empty: object
) -> list[Entry]:
    """What decides what ``fn`` does besides its identity and is not watched by the
    audit hook: its attributes and closure cells, and the same of functions in those
    cells. ``fn`` joins ``seen``, the runner's functions, whose code, defaults and
    keyword defaults the audit hook watches (reading them raises an audit event, too
    many to compare after each test)."""
    code = getattr(fn, "__code__", None)
    if code is None or id(fn) in seen:
        return []
    seen.add(id(fn))
    entries: list[Entry] = [
        (vars(fn), key, value, f"{shown}.{key}", 0) for key, value in list(vars(fn).items())
    ]
    for i, cell in enumerate(fn.__closure__ or ()):
        try:
            content = cell.cell_contents
        except ValueError:
            content = empty
        entries.append((cell, None, content, f"{shown} (its closure cell {i})", 1))
        if depth > 0:
            entries += _function_entries(content, f"{shown} (cell {i})", depth - 1, seen, empty)
    return entries


def _class_dict(cls: type) -> Any:
    """The dict behind a class's ``__dict__`` proxy, which reads four times faster than
    the proxy after each test (the proxy where the collector does not hand it out)."""
    import gc

    proxy = vars(cls)
    inner = [d for d in gc.get_referents(proxy) if type(d) is dict]
    return inner[0] if len(inner) == 1 else proxy


def _module_entries(name: str, module: Any, seen: set[int], empty: object) -> list[Entry]:
    """Every callable ``module`` defines, every method of its classes, and what decides
    what each of those functions does."""
    entries: list[Entry] = []
    for attr, value in list(vars(module).items()):
        if not callable(value) or getattr(value, "__module__", None) != name:
            continue
        shown = f"{name}.{attr}"
        entries.append((vars(module), attr, value, shown, 0))
        entries += _function_entries(value, shown, 2, seen, empty)
        if not isinstance(value, type):
            continue
        namespace = _class_dict(value)
        for member, thing in list(namespace.items()):
            if not (callable(thing) or isinstance(thing, (staticmethod, classmethod, property))):
                continue
            entries.append((namespace, member, thing, f"{shown}.{member}", 0))
            for part in (thing, getattr(thing, "__func__", None), getattr(thing, "fget", None)):
                entries += _function_entries(part, f"{shown}.{member}", 2, seen, empty)
    return entries


def _current(holder: Any, key: Any, kind: int, empty: object) -> object:
    if kind == 0:
        return holder.get(key, empty)
    try:
        return holder.cell_contents
    except ValueError:
        return empty


def _where_defined(value: object) -> tuple[str | None, int]:
    """Where a replacement's code was written (None: nowhere Python can tell)."""
    code: Any = value if hasattr(value, "co_filename") else None  # a function's code
    for candidate in (
        value,
        getattr(value, "__func__", None),
        getattr(value, "func", None),  # functools.partial
        getattr(type(value), "__call__", None),  # noqa: B004 (its code, not a test)
    ):
        if code is None:
            code = getattr(candidate, "__code__", None)
    if code is None:
        return None, 0
    return code.co_filename, code.co_firstlineno


Kinds = tuple[list[Entry], list[Entry]]  # the entries by how each is read


def _snapshotter(
    kinds: Kinds, repo_file: RepoFile, empty: object, seen: set[int]
) -> tuple[Callable[[], None], Callable[[Any], None]]:
    """``snapshot_new``, which adds the entries of every runner module loaded since its
    last call, and ``watch_plugins``, which adds the modules of the installed plugins a
    pytest config holds (a plugin module of a larger package, such as celery's, not the
    package) and snapshots what of them is loaded."""
    import builtins

    # The packages whose code decides outcomes (see the module's docstring).
    families = {"pytest", "_pytest", "pluggy", "iniconfig", "packaging", "unittest", "contextlib"}
    plugin_modules: set[str] = set()
    snapshotted: set[str] = set()

    def watch(entries: list[Entry]) -> None:
        for entry in entries:
            kinds[entry[4]].append(entry)

    watch(
        [
            (vars(builtins), a, v, f"builtins.{a}", 0)
            for a, v in vars(builtins).items()
            if callable(v)
        ]
    )

    def runner_module(name: str) -> bool:
        if name.partition(".")[0] in families:
            return True
        return any(name == m or name.startswith(m + ".") for m in plugin_modules)

    def snapshot_new() -> None:
        for name, module in list(sys.modules.items()):
            if name in snapshotted or not runner_module(name):
                continue
            snapshotted.add(name)
            if module is None or repo_file(str(getattr(module, "__file__", None) or "")):
                continue
            try:
                watch(_module_entries(name, module, seen, empty))
            except Exception:  # noqa: S112 (an odd module must never break the run)
                continue

    def watch_plugins(config: Any) -> None:
        try:
            plugins = list(config.pluginmanager.list_name_plugin())
        except Exception:  # a watcher must never break the run
            plugins = []
        for _, plugin in plugins:
            name = _installed_module(plugin, repo_file)
            if name is not None:
                plugin_modules.add(name)
        snapshot_new()

    return snapshot_new, watch_plugins


def _installed_module(plugin: object, repo_file: RepoFile) -> str | None:
    """The name of the module that defines a pytest plugin (the module itself, or its
    class's) where it is installed, not the workspace's; None otherwise."""
    try:
        module = sys.modules.get(getattr(plugin, "__name__", None) or "")
        if module is not plugin:
            module = sys.modules.get(getattr(type(plugin), "__module__", None) or "")
        filename = str(getattr(module, "__file__", None) or "")
        if module is None or not filename or repo_file(filename) is not None:
            return None
        return str(module.__name__)
    except Exception:  # an odd plugin is not ours to judge
        return None


def _changed(kinds: Kinds, empty: object) -> list[tuple[list[Entry], int]]:
    """The entries whose value is no longer the one remembered, as (list, index): one
    comprehension per kind, no call per entry, as this runs after every test."""
    maps, cells = kinds
    found = [(maps, i) for i, (h, k, v, _, _) in enumerate(maps) if h.get(k, empty) is not v]
    try:
        found += [(cells, i) for i, (h, _, v, _, _) in enumerate(cells) if h.cell_contents is not v]
    except ValueError:  # a cell emptied
        found += [
            (cells, i)
            for i, (h, _, v, _, _) in enumerate(cells)
            if _current(h, None, 1, empty) is not v
        ]
    return found


def _report_change(
    record: Record, repo_file: RepoFile, test_path: Any, entries: list[Entry], i: int, empty: object
) -> None:
    """Remembers entry ``i``'s new value and records it where the repository made it."""
    holder, key, _value, shown, kind = entries[i]
    current = _current(holder, key, kind, empty)
    entries[i] = (holder, key, current, shown, kind)
    filename, line = _where_defined(current)
    path = repo_file(filename) if filename is not None else None
    # Plugins and pytest itself patch its classes as they load; only a replacement
    # written in the repository's own code, or one whose code cannot be found at all,
    # is the repository's doing.
    if filename is not None and (path is None or test_path.search(path)):
        return
    record("runner-monkeypatch", f"runner code replaced: {shown}", path, line)


def _module_shadows(
    record: Record, repo_file: RepoFile, test_path: Any, shadow_names: set[str]
) -> Callable[[], bool]:
    """``check_modules``: a runner or standard-library module loaded from the workspace
    is recorded; it returns whether any module was loaded since its last call."""
    checked: set[str] = set()

    def check_modules() -> bool:
        if checked.issuperset(sys.modules):
            return False
        for name, module in list(sys.modules.items()):
            if name in checked:
                continue
            checked.add(name)
            top = name.partition(".")[0]
            if top not in sys.stdlib_module_names and top not in shadow_names:
                continue
            rel = repo_file(str(getattr(module, "__file__", None) or ""))
            if rel is not None and not test_path.search(rel):
                what = f"the workspace's {rel} shadows the module {name}"
                record("module-shadow", what, rel, 1)
        return True

    return check_modules


def _runner_checker(
    record: Record, repo_file: RepoFile, test_path: Any, shadow_names: set[str], runner: set[int]
) -> tuple[Callable[[], None], Callable[[Any], None]]:
    """``check_runner``, which reports a runner entry changed from the repository's code
    and a runner or standard-library module loaded from the workspace, and
    ``watch_plugins`` (see :func:`_snapshotter`); ``runner`` gets the ids of the
    runner's functions, for the audit hook."""
    empty = object()  # an empty closure cell, or an entry no longer there
    kinds: Kinds = ([], [])
    snapshot_new, watch_plugins = _snapshotter(kinds, repo_file, empty, runner)
    check_modules = _module_shadows(record, repo_file, test_path, shadow_names)

    def check_runner() -> None:
        for entries, i in _changed(kinds, empty):
            _report_change(record, repo_file, test_path, entries, i, empty)
        if check_modules():
            snapshot_new()

    snapshot_new()
    return check_runner, watch_plugins
