"""Files that run, or choose what runs, without anyone asking: a reviewer who checks
out the branch, a CI job or an install runs them, with that person's or job's secrets.

- **Scripts CI runs.** A workflow is CI configuration (hygiene blocks it), but a
  ``run: ./ci/run-tests.sh`` hands the job to a file outside ``.github/``: editing that
  file edits the job. Every file a CI configuration at the base names by its path (or a
  local action it ``uses:``) counts as CI configuration.
- **Install hooks.** npm runs ``preinstall``/``install``/``postinstall``/``prepare``
  (and their kin) on ``npm install``; husky, simple-git-hooks, yorkie and lint-staged
  keys install git hooks. Adding or changing one in any ``package.json``, new or
  existing, is a finding.
- **Editor and VCS auto-run files.** ``.vscode/tasks.json`` (``runOn: folderOpen``),
  workspace settings, ``.envrc`` (direnv), ``.env``, husky's ``.husky/*``, lefthook,
  ``.pre-commit-config.yaml``, gitpod and mise tasks run when someone opens or commits.
- **Package index configuration.** ``--index-url``/``--extra-index-url``/
  ``--trusted-host``/``--find-links`` in a requirements file, a direct URL requirement,
  an index in ``pyproject.toml``/``Pipfile``, or a change to ``pip.conf``, ``.npmrc``,
  ``.yarnrc`` and their kin make installs fetch code from somewhere else (dependency
  confusion).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from bot.hostgit import run_git
from worker.gates.trees import read_head

_MAX_BYTES = 1024 * 1024

# Exact names (case-folded) at any depth, and folders whose every file counts.
AUTO_RUN_FILES = frozenset(
    {
        ".vscode/tasks.json",
        ".vscode/settings.json",
        ".vscode/launch.json",
        ".envrc",
        ".env",
        ".env.local",
        ".pre-commit-config.yml",  # the .yaml spelling is CI configuration already
        ".pre-commit-hooks.yaml",
        "lefthook.yml",
        "lefthook.yaml",
        ".lefthook.yml",
        ".lefthook.yaml",
        "lefthook-local.yml",
        ".huskyrc",
        ".huskyrc.json",
        ".huskyrc.js",
        ".simple-git-hooks.json",
        ".simple-git-hooks.js",
        ".simple-git-hooks.cjs",
        ".lintstagedrc",
        ".lintstagedrc.json",
        ".lintstagedrc.js",
        ".lintstagedrc.yml",
        "lint-staged.config.js",
        "lint-staged.config.mjs",
        ".gitpod.yml",
        ".gitpod.dockerfile",
        "mise.toml",
        ".mise.toml",
        ".replit",
    }
)
AUTO_RUN_DIRS = (
    ".husky/",
    ".githooks/",
    ".git-hooks/",
    ".lefthook/",
    ".idea/",
    ".fleet/",
    ".zed/",
    ".mise/",
)
AUTO_RUN_SUFFIXES = (".code-workspace",)
PACKAGE_INDEX_FILES = frozenset(
    {
        "pip.conf",
        "pip.ini",
        ".pypirc",
        ".npmrc",
        ".yarnrc",
        ".yarnrc.yml",
        ".pnpmrc",
        "bunfig.toml",
        "uv.toml",
        ".condarc",
        "nuget.config",
        ".gemrc",
        ".bundle/config",
    }
)
NPM_LIFECYCLE = (
    "preinstall",
    "install",
    "postinstall",
    "preprepare",
    "prepare",
    "postprepare",
    "prepublish",
    "prepack",
    "postpack",
    "dependencies",
)
NPM_HOOK_KEYS = ("husky", "simple-git-hooks", "gitHooks", "pre-commit", "lint-staged")
# pip's options that choose where packages come from, in requirements files.
_INDEX_OPTION = re.compile(
    r"^\s*(-i|--index-url|--extra-index-url|--trusted-host|-f|--find-links|--no-index)"
    r"(?=[\s=]|$)|^\s*(-e|--editable)[\s=]+\S*://"
    # A direct URL requirement (``pkg @ https://...``, ``git+https://...``, a wheel URL).
    r"|^\s*[^#\s][^#]*?@\s*[a-z+]+://|^\s*([a-z]+\+)?(https?|ftp|file)://",
    re.I,
)
# An index or a package source in pyproject.toml, Pipfile or setup.cfg.
_INDEX_CONFIG = re.compile(
    r"^\s*(\[\[?(tool\.(uv|pdm|poetry|hatch\.envs\.[\w.-]+)\.)?(index|source|sources)\]\]?"
    r"|(extra-)?index-url\s*=|(extra_)?index_url\s*=|find-links\s*=|dependency_links\s*="
    r"|\[\[source\]\]|url\s*=\s*[\"']https?://(?!pypi\.org/simple))",
    re.I,
)
_REQUIREMENTS = re.compile(
    r"(^|/)([^/]*requirements[^/]*|[^/]*constraints[^/]*)\.(txt|in|pip)$|(^|/)[^/]*\.pip$",
    re.I,
)
_INDEX_CONFIG_FILES = re.compile(r"(^|/)(pyproject\.toml|pipfile|setup\.cfg)$", re.I)
_SCRIPT_EXT = re.compile(
    r"\.(sh|bash|zsh|ksh|fish|ps1|psm1|bat|cmd|py|js|mjs|cjs|ts|rb|pl|php|yml|yaml)$", re.I
)
_LOCAL_ACTION = re.compile(r"\buses:\s*['\"]?\./([^\s'\"@#]+)")


@dataclass(frozen=True)
class AutoRunFinding:
    rule: str  # ci-script, install-hook, auto-run-file, package-index
    path: str
    line: int | None
    message: str


def auto_run_reason(path: str) -> str | None:
    p = path.casefold()
    name = p.rsplit("/", 1)[-1]
    if (
        p in AUTO_RUN_FILES
        or name in {".envrc", ".env", ".env.local"}
        or p.startswith(AUTO_RUN_DIRS)
        or p.endswith(AUTO_RUN_SUFFIXES)
    ):
        return (
            "the patch changes a file that an editor, git or a shell runs on its own "
            "(on folder open, on commit, on cd)"
        )
    return None


def package_index_reason(path: str) -> str | None:
    p = path.casefold()
    if p in PACKAGE_INDEX_FILES or p.rsplit("/", 1)[-1] in PACKAGE_INDEX_FILES:
        return "the patch changes where packages are installed from (package index configuration)"
    return None


def index_line_reason(path: str, text: str) -> str | None:
    """Why an added line of a requirements or project file changes where packages come
    from, or None."""
    if _REQUIREMENTS.search(path) and _INDEX_OPTION.search(text):
        return f"the patch makes pip install from another source ({text.strip()[:120]!r})"
    if _INDEX_CONFIG_FILES.search(path) and _INDEX_CONFIG.search(text):
        return f"the patch adds a package index or source ({text.strip()[:120]!r})"
    return None


def tracked_files(tree: Path) -> list[str]:
    proc = run_git(tree, "ls-files", "-z")
    if proc.returncode != 0:
        return []
    return [p for p in proc.stdout.decode(errors="surrogateescape").split("\0") if p]


def ci_run_scripts(before: Path, ci_paths: list[str], changed: list[str]) -> list[AutoRunFinding]:
    """Changed files that a CI configuration at the base names by path (``run:
    ./ci/run-tests.sh``, ``bash scripts/deploy``, a GitLab ``include: local:``) or
    whose folder is a local action (``uses: ./.ci/action``)."""
    texts = {p: _read(before, p) for p in ci_paths}
    found: list[AutoRunFinding] = []
    for path in changed:
        if path in texts:
            continue  # CI configuration itself: hygiene's ci-config rule
        for ci_path, text in texts.items():
            if text is None:
                continue
            line = _names(text, path)
            if line is not None:
                found.append(
                    AutoRunFinding(
                        "ci-script",
                        path,
                        None,
                        f"CI runs this file ({ci_path}, line {line}): changing it changes "
                        "the CI job, which runs with the repository's secrets",
                    )
                )
                break
    return found


def _names(text: str, path: str) -> int | None:
    """The line of ``text`` that names ``path`` as a file to run (or a local action
    folder holding it), or None."""
    # setup.py runs in every install, not only in CI: the code a CI job runs indirectly
    # (the package its tests import) is judged by the tests and the other gates.
    named_as_script = path != "setup.py" and (
        bool(_SCRIPT_EXT.search(path)) or ("/" in path and "." not in path.rsplit("/", 1)[-1])
    )
    pattern = re.compile(rf"(?<![\w.@/-])(?:\./)?{re.escape(path)}(?![\w/.-])")
    for number, line in enumerate(text.split("\n"), start=1):
        if named_as_script and pattern.search(line):
            return number
        for action in _LOCAL_ACTION.findall(line):
            folder = action.rstrip("/") + "/"
            if path.startswith(folder):
                return number
    return None


def install_hooks(before: Path, after: Path, paths: list[str]) -> list[AutoRunFinding]:
    """npm lifecycle scripts and git-hook keys added or changed in any package.json."""
    found: list[AutoRunFinding] = []
    for path in paths:
        if path.rsplit("/", 1)[-1] != "package.json":
            continue
        after_text = _read(after, path)
        old, new = _package(_read(before, path)), _package(after_text)
        for what in sorted(k for k in new if new[k] != old.get(k)):
            found.append(
                AutoRunFinding(
                    "install-hook",
                    path,
                    _key_line(after_text or "", what),
                    f"the patch adds or changes {what} in package.json, which npm or git "
                    "runs on install or commit",
                )
            )
    return found


def _key_line(text: str, what: str) -> int | None:
    """The line where the hook's key is written (``what`` quotes it: "the 'prepare'
    script"), for the reviewer."""
    key = re.search(r"'([^']+)'", what)
    if key is None:
        return None
    for number, line in enumerate(text.split("\n"), start=1):
        if f'"{key[1]}"' in line:
            return number
    return None


def _package(text: str | None) -> dict[str, str]:
    """The install-time hooks of a package.json (an unreadable one: all of it)."""
    if text is None:
        return {}
    try:
        data = json.loads(text)
    except ValueError:
        return {"the whole (unreadable) file": text}
    if not isinstance(data, dict):
        return {"the whole file": text}
    hooks: dict[str, str] = {}
    scripts = data.get("scripts")
    if isinstance(scripts, dict):
        for name in NPM_LIFECYCLE:
            if name in scripts:
                hooks[f"the {name!r} script"] = json.dumps(scripts[name])
    elif scripts is not None:
        hooks["scripts"] = json.dumps(scripts)
    for key in NPM_HOOK_KEYS:
        if key in data:
            hooks[f"the {key!r} key"] = json.dumps(data[key], sort_keys=True)
    return hooks


def _read(tree: Path, rel: str) -> str | None:
    data = read_head(tree, rel, _MAX_BYTES)
    return None if data is None else data.decode(errors="replace")
