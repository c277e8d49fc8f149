"""Ribbit's pytest bootstrap: runs INSIDE the sandbox, as the test interpreter's first
code, and reports the run over a channel the code under test cannot quietly forge.

Started as ``python -P -c <this file's source> <test-path regex> <report size cap>
<pytest args...>`` with file descriptor 3 open on the wrapper's own stdout
(worker/gates/testrun.py). In order, before any repository file can load:

0. the interpreter makes itself non-dumpable: the processes the tests start run as the
   same user, with no CAP_SYS_PTRACE in either sandbox (both drop every capability), so
   they can neither ptrace it, nor read its memory (/proc/<pid>/mem,
   ``process_vm_readv``), nor open its descriptors through /proc/<pid>/fd. It asks the
   kernel again after each test and at the seal, and where the process was made dumpable
   again (a ``prctl`` through ctypes runs no Python code) records ``dumpable`` and undoes
   it;
1. a fresh random key is written to fd 3 as the channel's first record. Nothing of
   the repository has run yet, so the first record is always this one; every later
   record carries an HMAC under that key and a sequence number, so records the code
   under test writes to the channel, drops or reorders show as a broken channel. The
   key lives only in closures (reached only through the garbage collector or frames,
   which the audit hook below reports first); a child ``os.fork`` makes has it wiped;
2. a PEP 578 audit hook is installed. It reports, as a ``tamper`` record sent at once
   with ``os.write`` (nothing buffered for later code to drop), every garbage-collector
   traversal, frame access, ``sys.settrace``/``setprofile``, new audit hook, code
   object swap, interpreter-memory ``ctypes`` use, a ctypes lookup of libc's process
   controls (``prctl``, ``ptrace``, ``process_vm_*``, ``dup2``, ``fork``, ``syscall``...;
   ctypes' own frames are passed over to reach who asked) and ``open`` of /proc and /dev/fd
   descriptors (the report's only names), when the innermost Python frame that caused
   it (or the caller of ``inspect``, which wraps frame access) is a non-test file of
   the workspace, or a copy of one installed into site-packages (watchcopies). The
   standard library and pytest raise such events all the time (namedtuple, logging,
   inspect); those are not the repository's;
3. the workspace goes on ``sys.path`` AFTER the standard library and site-packages
   (``-P`` left it off the front), so no repository file shadows the runner's or the
   standard library's modules; a module of either name loaded from the workspace
   later is reported anyway;
4. pytest (its built-in plugins imported now), pluggy, unittest and ``contextlib`` are
   snapshotted, installed plugins as pytest loads them (before the first conftest):
   every callable they define and what decides what each function does without
   replacing it (its closure cells, defaults, attributes). After each test and at the
   end each is compared by identity (:mod:`worker.gates.watchrunner`): class attribute
   assignment and a closure cell's new content raise no audit event, so a wrapper
   around ``unittest.TestCase.run``, a context manager's exit that swallows the test's
   exception, or a ``contextmanager``'s generator swapped in its cell is found this way;
5. pytest runs with Ribbit's plugin counting failures and the JUnit report in an
   anonymous close-on-exec memfd, written through /proc/self/fd/N and sealed as the
   session's last step: no path any other process can name, nothing in $TMPDIR, the
   environment or the command line; its bytes and the counts go out as records. Beside
   it, what each test function raised is seen right around its call and compared with
   its report (:mod:`worker.gates.watchwitness`: ``swallowed``), and when collection
   ends the test code loaded is compared with its files compiled afresh, the files
   with what they were before any repository code ran (:mod:`worker.gates.watchtests`:
   ``test-code``). pytest's config, session and plugin manager, which pytest leaves in
   plain sight (the assertion rewriter in ``sys.meta_path``, ``pytest.mark``...), are
   replaced there by guards that record the repository's code reaching them
   (:mod:`worker.gates.watchguard`: ``runner-reach``): from the plugin manager, Ribbit's
   own plugins, and through their closures the channel's key, are in reach.

Audit hooks detect; they are not a sandbox (PEP 578 says as much): code in the same
process can still do what it likes, and some paths raise no event (a reference to
pytest's objects reached through a hook pytest installs globally). What this buys is
that the usual ways to reach the runner are recorded before they succeed, and cannot
be un-sent. Limits: code in the process can write the report's descriptor without an
``open`` (no event), though pytest rewrites the report whole and it is sealed right
after, so only a thread racing that seal gets through. Processes the tests start can
kill or stop the interpreter (no end record: judged on its exit status, or a timeout),
write to the console, and reach the channel through the (dumpable) wrapper's
/proc/<pid>/fd/1 to add unsigned lines (a broken channel) or read records away (a gap
breaks it; lost last records leave a run with no end; the key went by before any of
them existed). One forked past Python's fork handlers keeps the key and the report's
descriptor: a watched event there breaks the channel; its writes race the seal. A child
``os.fork`` makes (a ``multiprocessing`` fork) has the key wiped and its records
dropped: the watch ends at the fork. Tests run here, never in pytest-xdist's workers or
``--forked``'s children (both are switched off); a test whose report another process
sent all the same (a ``forked`` mark, a plugin of the repository's tests) is recorded
as ``outside``, and the gate takes no evidence from such a run. Between two of step 0's
checks, made dumpable through a call that is no flagged ctypes lookup, the process is
readable by its children. The report is read only while its descriptor is the memfd,
checked before and after each read; a thread that swaps another in and back between two
checks is not seen. Step 4's comparison is made after each test: a change undone
before the next check is not seen there, which is why what each test function raised
is also recorded right around its call (watchwitness) and compared with its report
(``swallowed``). What that leaves: assertions against objects the code under test made
to agree with anything, test code changed after collection, and a unittest subTest's
failure swallowed inside the method.

The channel and the report's steps (0, 1 and 5's memfd) are in
:mod:`worker.gates.watchchannel`, step 4's snapshot in :mod:`worker.gates.watchrunner`,
the test code's check in :mod:`worker.gates.watchtests`, where installed copies of the
repository's code are in :mod:`worker.gates.watchcopies`, the witness in
:mod:`worker.gates.watchwitness`, the guards in :mod:`worker.gates.watchguard`;
:func:`worker.gates.watch.bootstrap_source` puts their code in place of the imports
below, so one program runs. This module imports nothing else from Ribbit: it runs in
the repository's interpreter.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any

# The channel and the report's steps (0, 1 and 5's memfd), step 4's snapshot, the test
# code's check, the witness, the guards.
# watch.bootstrap_source() puts each module's code in place of its import: in the
# sandbox nothing of Ribbit's is importable, and one program keeps every step under
# _run_privately.
from worker.gates.watchchannel import (  # ribbit-watch: inlined
    Record,
    _dumpable_watch,
    _forget_at_fork,
    _open_channel,
    _private_report,
    _recorder,
    _send_results,
    _undumpable,
)
from worker.gates.watchcopies import _installed_copies, _workspace_dists  # ribbit-watch: inlined
from worker.gates.watchguard import (  # ribbit-watch: inlined
    _asker,
    _guard,
    _guard_doors,
    _guarding,
    _keeper,
    _repo_spot,
)
from worker.gates.watchrunner import (  # ribbit-watch: inlined
    _changed,
    _class_dict,
    _current,
    _function_entries,
    _installed_module,
    _module_entries,
    _module_shadows,
    _report_change,
    _runner_checker,
    _snapshotter,
    _where_defined,
)
from worker.gates.watchtests import (  # ribbit-watch: inlined
    _all_codes,
    _constant,
    _functions_in,
    _note_test_files,
    _signature,
    _test_code_checker,
)
from worker.gates.watchwitness import _unittest_witness, _witness  # ribbit-watch: inlined

# The bootstrap's steps, each a function of the captured primitives it is handed.
# _run_privately rebinds every one of them to the private globals, so a name one step
# calls is looked up there, never in the ``__main__`` namespace the tests can reach.
RepoFile = Callable[[str], "str | None"]


def _ribbit_main() -> None:
    import os
    import re

    kept = _undumpable()
    undumpable = kept()
    # Anonymous, close-on-exec, in no folder: no other process can name it.
    report_fd = os.memfd_create("ribbit-report", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    send = _open_channel(3, report_fd)
    test_path = re.compile(sys.argv[1], re.I)
    report_cap = int(sys.argv[2])
    workspace = os.getcwd().rstrip("/") + "/"
    report, seal, read = _private_report(report_fd)
    repo_file = _in_workspace(workspace, _installed_copies(workspace))
    noted = _note_test_files(workspace, test_path)
    record = _recorder(send)
    if not undumpable:
        record("dumpable", "the test interpreter could not be made non-dumpable", None, 0)
    runner: set[int] = set()  # the runner's functions, as step 4 finds them
    _install_hook(record, repo_file, test_path, runner)
    check_dumpable = _dumpable_watch(kept, record)

    def sealed() -> None:
        check_dumpable()
        why = seal()
        if why is not None:
            record("report-descriptor", why, None, 0)

    sys.path.append(workspace.rstrip("/"))
    runner_names = {"pytest", "_pytest", "pluggy", "iniconfig", "packaging"}
    _report_named_like_modules(record, workspace, test_path, runner_names)

    _import_runner()
    check_code, watch_plugins = _runner_checker(record, repo_file, test_path, runner_names, runner)

    def check_runner() -> None:
        check_code()
        check_dumpable()

    configs: list[Any] = []
    check_plugins = _plugin_checker(record, repo_file, test_path, configs)
    check_test_code = _test_code_checker(record, workspace, test_path, noted)
    guard = _guarding(record, _asker(repo_file, test_path))
    beside = [_load_watch(watch_plugins, check_test_code, guard), _witness(record)]
    status, failed = _run_pytest(
        report, configs, check_runner, check_plugins, sealed, record, beside
    )
    check_runner()
    check_plugins()
    sealed()  # where pytest ended before its session did (a usage error)
    data, own = read(report_cap)
    if not own:
        record("report-descriptor", "the report's descriptor was replaced", None, 0)
    _send_results(send, data, report_cap, status, failed)
    raise SystemExit(status)


def _import_runner() -> None:
    """pytest and its built-in plugins, loaded now so that their code is held still
    before any of the repository's runs (pytest would import the plugins later, after
    reading the command line)."""
    import importlib

    import _pytest.config

    for plugin in _pytest.config.default_plugins:
        try:
            importlib.import_module(f"_pytest.{plugin}")
        except ImportError:
            continue


def _in_workspace(workspace: str, copies: Mapping[str, str]) -> RepoFile:
    """The workspace path of a file the repository's code runs from: in the workspace,
    or in a copy of it installed into site-packages (watchcopies)."""

    def repo_file(filename: str) -> str | None:
        if filename.startswith(workspace):
            return filename[len(workspace) :]
        return copies.get(filename)

    return repo_file


def _hands_out_frames(f: Any, repo_file: RepoFile) -> bool:
    """Whether frame ``f`` is a standard-library function that returns frames to its
    caller (so the caller, not it, is who reached them): anything in inspect, and
    traceback's ``walk_stack``/``walk_tb`` and logging's ``currentframe`` when called
    from outside their module (their own internal use returns no frame); and ctypes'
    own Python code, which looks symbols up and reads memory for its caller
    (``libc.prctl`` raises its ``ctypes.dlsym`` inside ``CDLL.__getitem__``)."""
    name = f.f_code.co_filename
    if repo_file(name) is not None:
        return False
    if name.endswith(("/inspect.py", "/ctypes/__init__.py")):
        return True
    caller = f.f_back
    if caller is None or caller.f_code.co_filename == name:
        return False
    if name.endswith("/traceback.py"):
        return f.f_code.co_name in ("walk_stack", "walk_tb")
    return name.endswith("/logging/__init__.py") and f.f_code.co_name == "<lambda>"


def _attribute(frame: Any, repo_file: RepoFile, test_path: Any) -> tuple[str, int] | None:
    """The non-test workspace file and line that caused the event, or None: the
    innermost frame, or the caller of a function that hands frames out. Other
    standard-library and pytest code raises such events for its own use (namedtuple,
    logging's caller lookup, traceback formatting) and hands no frame on."""
    f = frame
    while f is not None and _hands_out_frames(f, repo_file):
        f = f.f_back
    return _repo_spot(f, repo_file, test_path)


def _classify(
    event: str, args: tuple[object, ...], descriptors: Any, runner: set[int]
) -> str | None:
    if event in ("gc.get_objects", "gc.get_referrers", "gc.get_referents"):
        return f"garbage-collector traversal ({event})"
    if event in ("sys._getframe", "sys._current_frames", "sys._getframemodulename"):
        return f"frame access ({event})"
    # The runner's functions (step 4 fills ``runner`` with their ids): defaults replaced,
    # or keyword defaults taken to change in place (comparing them after each test
    # would raise an audit event per function read).
    if event.startswith("object.__") and len(args) > 1 and id(args[0]) in runner:
        if event == "object.__setattr__" and args[1] in ("__defaults__", "__kwdefaults__"):
            return f"a runner function's defaults replaced ({args[1]})"
        if event == "object.__getattr__" and args[1] == "__kwdefaults__":
            return "a runner function's keyword defaults taken (__kwdefaults__)"
    if event == "object.__getattr__" and len(args) > 1:
        if args[1] in ("tb_frame", "gi_frame", "cr_frame", "ag_frame", "f_back"):
            return f"frame access through .{args[1]}"
        return None
    if event == "object.__setattr__" and len(args) > 1 and args[1] == "__code__":
        return "a function's code replaced (__code__)"
    if event in ("sys.settrace", "sys.setprofile", "sys.addaudithook"):
        return f"interpreter hook installed ({event})"
    if event == "ctypes.dlopen" and (args[0] is None or "python" in str(args[0])):
        return "ctypes access to the interpreter (ctypes.pythonapi)"
    if event in ("ctypes.cdata", "ctypes.string_at", "ctypes.wstring_at"):
        return f"ctypes read of raw memory ({event})"
    if event == "ctypes.dlsym" and len(args) > 1 and str(args[1]).startswith(("Py", "_Py")):
        return f"ctypes access to the interpreter ({args[1]})"
    # libc's calls that undo step 0 (prctl: dumpable again, so a child can read the key
    # from memory), reach another process, or fork or swap descriptors past Python's
    # handlers and checks; syscall reaches every one of them.
    process_calls = {
        "prctl",
        "ptrace",
        "process_vm_readv",
        "process_vm_writev",
        "dup2",
        "dup3",
        "fork",
        "vfork",
        "clone",
        "clone3",
        "syscall",
    }
    if event == "ctypes.dlsym" and len(args) > 1 and str(args[1]) in process_calls:
        return f"ctypes access to the process's own controls ({args[1]})"
    if event == "open" and args and isinstance(args[0], (str, bytes)):
        path = args[0] if isinstance(args[0], str) else args[0].decode("utf-8", "replace")
        if descriptors.match(path):
            return f"open of {path}"
    return None


def _install_hook(record: Record, repo_file: RepoFile, test_path: Any, runner: set[int]) -> None:
    """Step 2: the audit hook, reporting each event the repository's code caused
    (``runner``: the ids of the runner's functions, filled in step 4)."""
    import _thread
    import re

    # Another process's or this one's descriptors and memory: the report's way out.
    descriptors = re.compile(r"/(proc/[^/]+(/task/[^/]+)?/(fd|map_files|mem|environ)|dev/fd)(/|$)")
    getframe = sys._getframe
    busy: set[int] = set()
    ident = _thread.get_ident

    def hook(event: str, args: tuple[object, ...]) -> None:
        me = ident()
        if me in busy:
            return
        busy.add(me)
        try:
            what = _classify(event, args, descriptors, runner)
            if what is not None:
                where = _attribute(getframe(1), repo_file, test_path)
                if where is not None:
                    record(event, what, where[0], where[1])
        except Exception:  # noqa: S110 (a watcher must never break the run)
            pass
        finally:
            busy.discard(me)

    sys.addaudithook(hook)


def _report_named_like_modules(
    record: Record, workspace: str, test_path: Any, runner_names: set[str]
) -> None:
    """Behind -P a top-level file named like the standard library or the runner is not
    imported in their place; having one is still how that attack looks."""
    import os

    for entry in sorted(os.listdir(workspace)):
        name = entry.removesuffix(".py")
        package = os.path.isfile(os.path.join(workspace, entry, "__init__.py"))
        shown = entry if entry.endswith(".py") else entry + "/"
        if not (entry.endswith(".py") or package) or test_path.search(shown):
            continue
        if name in sys.stdlib_module_names or name in runner_names:
            what = f"the workspace's {entry} is named like the module {name}"
            record("module-shadow", what, entry, 1)


def _plugin_checker(
    record: Record, repo_file: RepoFile, test_path: Any, configs: list[Any]
) -> Callable[[], None]:
    plugins_seen: set[int] = set()

    def check_plugins() -> None:
        """A pytest plugin whose hooks are written in the repository's non-test code
        (an entry point, ``-p``, ``PYTEST_PLUGINS``, one registered at run time) can
        rewrite every report without touching anything else."""
        for config in configs:
            for name, plugin in list(config.pluginmanager.list_name_plugin()):
                if plugin is None or id(plugin) in plugins_seen:
                    continue
                plugins_seen.add(id(plugin))
                for attr in list(dir(plugin)):
                    if not attr.startswith("pytest_"):
                        continue
                    try:
                        filename, line = _where_defined(getattr(plugin, attr))
                    except Exception:  # noqa: S112 (a plugin's odd attribute is not ours)
                        continue
                    path = repo_file(filename) if filename is not None else None
                    if path is not None and not test_path.search(path):
                        what = f"a pytest plugin from the repository's code ({name}: {attr})"
                        record("runner-plugin", what, path, line)
                        break

    return check_plugins


def _run_pytest(
    report: str,
    configs: list[Any],
    check_runner: Callable[[], None],
    check_plugins: Callable[[], None],
    seal: Callable[[], None],
    record: Record,
    beside: list[object],
) -> tuple[int, int]:
    """Step 5: pytest's exit status and how many tests failed, with the JUnit report
    written to ``report``, sealed as the session's last step, the runner checked after
    each test, and the plugins ``beside``. Every test runs in this process: xdist's
    workers and ``--forked``'s children would run the code under test unwatched and send
    back reports it could rewrite, so both are switched off (the log says so); a test
    whose result still comes from another process is recorded as ``outside``."""
    import pytest

    failed: set[str] = set()
    ran_here: set[str] = set()
    outside: set[str] = set()

    class RibbitWatch:
        @staticmethod
        @pytest.hookimpl(tryfirst=True)  # before xdist's own, which starts its workers
        def pytest_configure(config: pytest.Config) -> None:
            configs.append(config)
            _one_process(config.option)

        @staticmethod
        def pytest_collection_finish(session: pytest.Session) -> None:
            check_runner()
            check_plugins()

        @staticmethod
        @pytest.hookimpl(hookwrapper=True)  # whatever the other implementations raise
        def pytest_runtest_setup(item: pytest.Item) -> Any:
            ran_here.add(item.nodeid)
            yield

        @staticmethod
        def pytest_runtest_logreport(report: pytest.TestReport) -> None:
            if report.failed:
                failed.add(report.nodeid)
            if report.nodeid not in ran_here:
                outside.add(report.nodeid)
            if report.when == "teardown":
                check_runner()

        @staticmethod
        @pytest.hookimpl(trylast=True)
        def pytest_sessionfinish(session: pytest.Session) -> None:
            if outside:
                what = f"{len(outside)} test(s) ran in another process, which sent the results"
                record("outside", what, None, 0)
            seal()  # after junitxml's own sessionfinish wrote the report

    argv = [f"--junitxml={report}", "-o", "junit_family=xunit1", *sys.argv[3:]]
    sys.argv = [sys.argv[0], *sys.argv[3:]]
    status = int(pytest.main(argv, plugins=[RibbitWatch(), *beside]))
    return status, len(failed)


def _load_watch(
    watch_plugins: Callable[[Any], None],
    check_test_code: Callable[[Any], None],
    guard: Callable[[Any, str], Any],
) -> object:
    """A pytest plugin that watches what the run loads: it hands the installed plugins
    pytest loaded to the runner's snapshot (step 4) before the first conftest, the
    repository's first code, loads; guards each door to pytest's objects as pytest
    opens it (:mod:`worker.gates.watchguard`); checks the test code when collection
    ends."""
    import pytest

    class RibbitLoads:
        @staticmethod
        @pytest.hookimpl(tryfirst=True)
        def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
            watch_plugins(early_config)
            _guard_doors(guard)

        @staticmethod
        @pytest.hookimpl(trylast=True)
        def pytest_configure(config: pytest.Config) -> None:
            _guard_doors(guard)

        @staticmethod
        @pytest.hookimpl(tryfirst=True)
        def pytest_collectstart(collector: pytest.Collector) -> None:
            _guard_doors(guard)

        @staticmethod
        def pytest_collection_finish(session: pytest.Session) -> None:
            check_test_code(session.config)

        @staticmethod
        @pytest.hookimpl(tryfirst=True)
        def pytest_runtest_setup(item: pytest.Item) -> None:
            _guard_doors(guard)

    return RibbitLoads()


def _one_process(option: Any) -> None:
    """pytest's options set so that every test runs in this process: pytest-xdist's
    distribution and ``--forked`` off, and the log saying so."""
    off = []
    if getattr(option, "dist", "no") != "no":
        option.dist, option.tx = "no", []
        off.append("pytest-xdist's workers")
    if getattr(option, "forked", False):
        option.forked = False
        off.append("--forked")
    if off:
        sys.stderr.write(f"ribbit: {' and '.join(off)} off: a watched run is one process\n")


_STEPS = (
    _ribbit_main,
    _undumpable,
    _dumpable_watch,
    _private_report,
    _open_channel,
    _forget_at_fork,
    _import_runner,
    _in_workspace,
    _installed_copies,
    _workspace_dists,
    _recorder,
    _hands_out_frames,
    _attribute,
    _repo_spot,
    _classify,
    _install_hook,
    _report_named_like_modules,
    _function_entries,
    _class_dict,
    _module_entries,
    _current,
    _where_defined,
    _snapshotter,
    _installed_module,
    _changed,
    _report_change,
    _module_shadows,
    _runner_checker,
    _plugin_checker,
    _run_pytest,
    _load_watch,
    _asker,
    _keeper,
    _guard,
    _guarding,
    _guard_doors,
    _note_test_files,
    _constant,
    _signature,
    _all_codes,
    _functions_in,
    _test_code_checker,
    _witness,
    _unittest_witness,
    _one_process,
    _send_results,
)


def _run_privately() -> None:
    """Run :func:`_ribbit_main` and every step it calls with globals and builtins of
    their own: the closures look names up there, so ``builtins.len = ...`` or
    ``__main__._classify = ...`` by the code under test changes nothing the bootstrap
    uses (the first is reported, as a runner monkeypatch)."""
    import builtins
    import types

    own: dict[str, object] = {"__builtins__": dict(vars(builtins)), "__name__": "ribbit-watch"}
    own.update(sys=sys, Mapping=Mapping, Any=Any, Callable=Callable)
    for step in _STEPS:
        own[step.__name__] = types.FunctionType(step.__code__, own)
    own["_ribbit_main"]()  # type: ignore[operator]


if __name__ == "__main__":
    _run_privately()
