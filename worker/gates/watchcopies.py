"""Part of the pytest bootstrap (worker/gates/watchboot.py), inlined into it: where the
repository's code runs from besides the workspace.

A project whose set-up installs a copy of its package (``pip install .``, not ``-e``)
has its tests import that copy from site-packages: the bootstrap puts the workspace
after site-packages, and the copy was installed again from the tree under test before
the run (worker/sandbox/envcache.py). The audit hook and the guards attribute what the
workspace's files do; the copy's files are the same code under another path, so each
file a distribution installed from the workspace wrote (pip's ``direct_url.json`` names
the workspace, its ``RECORD`` the files) counts as the workspace file it copies. Read
once, before any repository code runs.
"""

from __future__ import annotations

import sys


def _workspace_dists(folders: list[str], workspace: str) -> list[tuple[str, list[str]]]:
    """The distributions in ``folders`` installed from ``workspace`` (pip's
    ``direct_url.json`` names it): each one's ``.dist-info`` folder and the paths its
    RECORD lists (relative to its folder; a script's is ``../../../bin/name``). Also the
    start-up scan's (worker/gates/startupscan.py)."""
    import csv
    import json
    import os

    found: list[tuple[str, list[str]]] = []
    for folder in folders:
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        for name in (n for n in names if n.endswith(".dist-info")):
            info = os.path.join(folder, name)
            try:
                with open(os.path.join(info, "direct_url.json"), encoding="utf-8") as f:
                    url = json.load(f).get("url", "")
                with open(os.path.join(info, "RECORD"), encoding="utf-8", newline="") as f:
                    rows = list(csv.reader(f))
            except (OSError, ValueError, AttributeError, csv.Error):
                continue
            if isinstance(url, str) and f"{url}/".startswith(f"file://{workspace}"):
                found.append((info, [row[0] for row in rows if row]))
    return found


def _installed_copies(workspace: str) -> dict[str, str]:
    """Each Python file a distribution installed from ``workspace`` wrote (its path as
    code objects name it) and the workspace path it copies (``calc/core.py`` found at the
    top or under ``src/``; the installed path where no such file is there)."""
    import os

    copies: dict[str, str] = {}
    folders = [p for p in sys.path if p and os.path.isdir(p) and not p.startswith(workspace)]
    for info, paths in _workspace_dists(list(dict.fromkeys(folders)), workspace):
        folder = os.path.dirname(info)
        for rel in paths:
            if not rel.endswith(".py") or rel.startswith(("/", "..")):
                continue
            path = os.path.normpath(os.path.join(folder, rel))
            tops = [top for top in ("", "src/") if os.path.isfile(workspace + top + rel)]
            copies[path] = f"{tops[0]}{rel}" if tops else rel
    return copies
