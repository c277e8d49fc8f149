"""The test interpreter's start-up, compared between the base's run and the patch's.

A watched run (worker/gates/watch.py) vouches for what happens after its bootstrap
starts. What runs before it (every ``import`` line of every ``.pth`` file in the site
folders, ``sitecustomize``) and the runner it then snapshots as the real one (pytest,
pluggy, the plugins pytest loads by entry point) come from the set-up environment. The
base's set-up made that environment; but a set-up step can run again over the patched
tree before its tests (a copy of the package installed again from the patched tree, whose
build code is the patch's; the patch's changed manifests installed with new
dependencies from the registry), and what it writes there runs, or is the runner, in
the patched run alone. A patched ``setup.py`` that drops a ``.pth`` into site-packages
which marks every failing test passed would otherwise pass a watched run with nothing
recorded: the forgery ran before there was anything to record it.

So right before each watched run, in the sandbox the run is about to use (after its
set-up step, with nothing left running), the interpreter lists them with ``-I -S``
(worker/gates/startupscan.py: nothing of site-packages runs), and the test gate
compares the patched run's list with the base run's: what is new, changed or gone is a
``tamper`` finding (``startup``). The list is read by a separate command before the
run, so nothing the run does can change it.

The same command lists two more things the set-up step can change: the environment's
files changed after its restore into the sandbox, the package's own copy aside
(``written``; compared with the base run's like the rest), and the workspace's test
files and test configuration (``workspace``), which :func:`setup_changes` compares with
the tree the host built: a test the patched build code rewrote is in no diff the gates
read.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from worker.gates.startupscan import workspace_rows
from worker.gates.watch import inlined_program
from worker.gates.weakened import TEST_PATH_RE

STARTUP = "startup"  # the finding's mechanism
_KINDS = {
    "interpreter": "the interpreter",
    "pth": "a .pth file (site runs its import lines at start-up)",
    "pth-module": "a module a .pth file imports at start-up",
    "customize": "a module site imports at start-up",
    "runner": "pytest's own code",
    "plugin": "a plugin pytest loads by itself (pytest11 entry point)",
    "limit": "the scan's file limit",
    "unread": "the start-up scan could not be read",
    "workspace": "a test file or test configuration in the workspace",
    "written": "a file written into the environment after its restore (not the package's copy)",
}
WORKSPACE = "workspace"  # rows of the workspace's files, compared with the tree
UNREAD = "unread"  # the kind of a watched run's one row where its scan failed


@dataclass(frozen=True, order=True)
class StartupItem:
    """One thing the interpreter runs at start-up or trusts as the runner, and a digest
    of its bytes."""

    kind: str
    name: str
    digest: str

    def describe(self) -> str:
        if self.kind == UNREAD:
            return f"{_KINDS[UNREAD]} ({self.digest})"
        return f"{_KINDS.get(self.kind, self.kind)}: {self.name}"


def scan_source() -> str:
    """The scan program, for ``python -I -S -c`` (watchcopies.py's code in place of its
    import: nothing of Ribbit's is importable in the sandbox)."""
    return inlined_program("startupscan.py", {"worker.gates.watchcopies": "watchcopies.py"})


def scan_command(python: str, written_since: int | None = None) -> list[str]:
    """The command that lists ``python``'s start-up, and the workspace's test files and
    test configuration, in the sandbox; with ``written_since`` (when the set-up
    environment's restore ended, in ns) the environment's files changed after it too."""
    since = [] if written_since is None else [str(written_since)]
    return [python, "-I", "-S", "-c", scan_source(), TEST_PATH_RE.pattern, *since]


def unread(why: str) -> tuple[StartupItem, ...]:
    """A watched run's start-up where its scan failed."""
    return (StartupItem(UNREAD, "the start-up scan", why),)


def parse_scan(stdout: str) -> tuple[StartupItem, ...] | None:
    """The scan's rows, or None where its output is not a scan's."""
    try:
        rows = json.loads(stdout)
    except ValueError:
        return None
    if not isinstance(rows, list):
        return None
    items: list[StartupItem] = []
    for row in rows:
        if not (isinstance(row, list) and len(row) == 3 and all(isinstance(v, str) for v in row)):
            return None
        items.append(StartupItem(*row))
    return tuple(sorted(items))


@dataclass(frozen=True)
class StartupChange:
    """What differs between the base run's start-up and the patched run's, or between
    the workspace a run started with and the tree it was made over."""

    what: str  # "new", "changed" or "gone"
    item: StartupItem

    def describe(self) -> str:
        if self.item.kind == UNREAD:
            return self.item.describe()
        if self.item.kind == WORKSPACE:
            done = {"new": "wrote", "changed": "changed", "gone": "removed"}[self.what]
            return f"the set-up step over the tree {done} {self.item.name} before the tests ran"
        where = {
            "new": "is not in the base's run",
            "changed": "is not what the base's run had",
            "gone": "was in the base's run and is not here",
        }[self.what]
        return f"{self.item.describe()} {where}"


def startup_changes(
    before: Iterable[StartupItem] | None, after: Iterable[StartupItem] | None
) -> list[StartupChange]:
    """What the patched run's interpreter starts with that the base run's did not, and
    the reverse; nothing where either run was not scanned (not watched)."""
    if before is None or after is None:
        return []
    before, after = tuple(before), tuple(after)
    if any(i.kind == UNREAD for i in before):
        return []  # nothing of the base's to compare with (its environment's trouble)
    unread = [StartupChange("new", i) for i in after if i.kind == UNREAD]
    if unread:
        return unread[:1]  # a scan that fails (or is made to) vouches for nothing
    return _compared(
        [i for i in before if i.kind != WORKSPACE], [i for i in after if i.kind != WORKSPACE]
    )


def setup_changes(items: Iterable[StartupItem] | None, tree: Path) -> list[StartupChange]:
    """What the workspace held when a watched run started (its ``workspace`` rows) and
    ``tree``, the host's tree the sandbox was made over, do not agree on: test files and
    test configuration a set-up step over that tree wrote, changed or removed."""
    if items is None:
        return []
    if any(i.kind == UNREAD for i in items):
        return []  # the run's scan failed: startup_changes says so
    ran = [i for i in items if i.kind == WORKSPACE]
    built = workspace_rows(f"{str(tree).rstrip('/')}/", TEST_PATH_RE)
    return _compared([StartupItem(*row) for row in built], ran)


def _compared(before: list[StartupItem], after: list[StartupItem]) -> list[StartupChange]:
    old: dict[tuple[str, str], set[str]] = {}
    new: dict[tuple[str, str], set[str]] = {}
    for items, into in ((before, old), (after, new)):
        for i in items:
            into.setdefault((i.kind, i.name), set()).add(i.digest)
    found: list[StartupChange] = []
    for key in sorted(old.keys() | new.keys()):
        if key not in old:
            found += [StartupChange("new", StartupItem(*key, d)) for d in sorted(new[key])]
        elif key not in new:
            found += [StartupChange("gone", StartupItem(*key, d)) for d in sorted(old[key])]
        else:
            # A tree's runs (a rerun) each scanned: any digest the base never had counts.
            found += [
                StartupChange("changed", StartupItem(*key, d)) for d in sorted(new[key] - old[key])
            ]
    return found
