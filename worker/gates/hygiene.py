"""Patch hygiene: what a bot's patch must never do, whatever its tests say.

It blocks patches that touch CI or the gates' own configuration, change how tests
are found or run (discovery.py; ``gates.test_config_changes: warn`` relaxes that),
lock files (unless the repository allows them), binary files, symlinks and
submodules; that add secrets; that delete or weaken tests or add code that can
rewrite a test run's report; that exceed the size limit; or that touch paths outside
``paths.allow`` or inside ``paths.deny``; that change files which run without anyone
asking (scripts CI runs by path, npm install hooks, editor and VCS auto-run files) or
where packages are installed from (worker/gates/autorun.py); and files whose text
hides what they do to the interpreter (worker/gates/source.py). Paths and modes are
judged as git applied them (the after tree's index), and a patch whose text names other
paths than git applied is blocked; line checks read the patch text. When ``git apply`` rejects the
patch, the text alone is judged.

Requirements files: a ``requirements*.txt`` (or ``*.in``/``*.lock``) that pins
hashes (``--hash=``, at the base or in the patch) is a lock file, because it is
pip-compile output that nobody edits by hand; one without hashes is an ordinary
dependency list and may change like any source file.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from bot.store.records.gate_report import Finding, GateResult
from worker.gates.autorun import (
    AutoRunFinding,
    auto_run_reason,
    ci_run_scripts,
    index_line_reason,
    install_hooks,
    package_index_reason,
    tracked_files,
)
from worker.gates.base import GateContext
from worker.gates.discovery import DiscoveryChange, discovery_changes
from worker.gates.patch import (
    ChangeStatus,
    FileChange,
    ParsedPatch,
    PatchParseError,
    RepoPath,
    normalize_repo_path,
    parse_patch,
)
from worker.gates.runner import run_tree_gate
from worker.gates.secrets import find_secrets
from worker.gates.source import ChangedFile, SourceFinding, bidi_in_line, check_files, repo_modules
from worker.gates.trees import (
    AppliedChange,
    PatchTrees,
    applied_changes,
    read_base_file,
    read_head,
)
from worker.gates.weakened import PatchedText, check_tests_weakened, is_test_path

NAME = "hygiene"
_PATCHED_HEAD_BYTES = 64 * 1024

_CI_DIRS = (
    ".github/workflows/",
    ".github/actions/",
    ".circleci/",
    ".buildkite/",
    ".gitlab/ci/",
    ".azure-pipelines/",
    ".woodpecker/",
    ".tekton/",
    ".teamcity/",
    ".semaphore/",
    ".ci/",
)
_CI_FILES = {
    ".gitlab-ci.yml",
    ".gitlab-ci.yaml",
    "jenkinsfile",
    "azure-pipelines.yml",
    "azure-pipelines.yaml",
    ".travis.yml",
    ".drone.yml",
    ".drone.yaml",
    "bitbucket-pipelines.yml",
    ".appveyor.yml",
    "appveyor.yml",
    "cloudbuild.yaml",
    "cloudbuild.yml",
    ".woodpecker.yml",
    "codemagic.yaml",
    ".pre-commit-config.yaml",
    ".github/codeowners",
    "codeowners",
    ".github/dependabot.yml",
    "buildspec.yml",
}
_GATE_CONFIG = {
    ".ribbit.yml",
    ".ribbit.yaml",
    ".semgrep.yml",
    ".semgrep.yaml",
    ".semgrepignore",
    ".gitmodules",
    ".gitattributes",
}
_LOCK_FILES = {
    "poetry.lock",
    "pipfile.lock",
    "package-lock.json",
    "npm-shrinkwrap.json",
    "yarn.lock",
    "pnpm-lock.yaml",
    "cargo.lock",
    "go.sum",
    "uv.lock",
    "pdm.lock",
    "composer.lock",
    "gemfile.lock",
    "bun.lockb",
    "bun.lock",
    "flake.lock",
    "packages.lock.json",
    "pixi.lock",
    "conda-lock.yml",
    "mix.lock",
    "pubspec.lock",
    "podfile.lock",
    "gradle.lockfile",
}
_REQUIREMENTS_RE = re.compile(r"(^|/)[^/]*requirements[^/]*\.(txt|in|lock)$", re.I)
_HASH_RE = re.compile(r"--hash[=\s]{1,8}\w{1,16}:[0-9a-f]{16}", re.I)


def _finding(
    rule: str,
    message: str,
    path: str | None = None,
    line: int | None = None,
    severity: str = "error",
) -> Finding:
    return Finding(gate=NAME, rule=rule, message=message, path=path, line=line, severity=severity)  # type: ignore[arg-type]


@lru_cache(maxsize=512)
def _glob_regex(pattern: str) -> re.Pattern[str]:
    """gitignore-like globs: ``*`` within a segment, ``**`` across segments, a trailing
    ``/`` means the folder and everything in it; a pattern without ``/`` matches a name
    at any depth."""
    pat = pattern.strip()
    if pat.endswith("/"):
        pat += "**"
    anchored = "/" in pat.rstrip("/")
    pat = pat.lstrip("/")
    out = []
    i = 0
    while i < len(pat):
        ch = pat[i]
        if pat.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pat.startswith("**", i):
            out.append(".*")
            i += 2
        elif ch == "*":
            out.append("[^/]*")
            i += 1
        elif ch == "?":
            out.append("[^/]")
            i += 1
        elif ch == "[":
            end = pat.find("]", i + 1)
            if end < 0:
                out.append(re.escape(ch))
                i += 1
            else:
                body = pat[i + 1 : end].replace("\\", "\\\\")
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append(f"[{body}]")
                i = end + 1
        else:
            out.append(re.escape(ch))
            i += 1
    body = "".join(out)
    prefix = "" if anchored else "(?:.*/)?"
    return re.compile(
        f"^{prefix}{body}(?:/.*)?$" if not body.endswith(".*") else f"^{prefix}{body}$"
    )


def path_matches(path: str, pattern: str) -> bool:
    return bool(_glob_regex(pattern).match(path))


def _is_ci_path(path: str) -> bool:
    p = path.casefold()
    name = p.rsplit("/", 1)[-1]
    return (
        p.startswith(_CI_DIRS)
        or p in _CI_FILES
        or name == "jenkinsfile"
        or name.startswith("jenkinsfile.")
        or name in {".gitlab-ci.yml", ".gitlab-ci.yaml"}
    )


class HygieneGate:
    name = NAME

    def run(self, ctx: GateContext) -> GateResult:
        """Alone (the trainer's reward calls it so): the trees are built here, so git's
        view of the patch and the discovery check count as they do in run_gates."""
        try:
            parse_patch(ctx.patch)
        except PatchParseError as exc:
            return GateResult(
                name=NAME,
                passed=False,
                findings=(
                    _finding("unreadable-patch", f"the patch is not a readable diff: {exc}"),
                ),
            )
        return run_tree_gate(self, ctx)

    def run_on_trees(self, ctx: GateContext, trees: PatchTrees) -> GateResult:
        applied = applied_changes(trees.after)
        extra = check_applied(ctx, trees.parsed, applied)
        changes = discovery_changes(trees.before, trees.after, [c.path for c in applied])
        extra += discovery_findings(ctx, changes)
        extra += source_findings(trees, applied)
        extra += autorun_findings(trees, [c.path for c in applied])
        return self._judge(ctx, trees.parsed, extra=tuple(extra), patched=_patched_head(trees))

    def run_unapplied(self, ctx: GateContext, reason: str) -> GateResult:
        extra = (_finding("patch-does-not-apply", reason),)
        try:
            parsed = parse_patch(ctx.patch)
        except PatchParseError:
            parsed = ParsedPatch(files=())
        return self._judge(ctx, parsed, extra=extra)

    def _judge(
        self,
        ctx: GateContext,
        parsed: ParsedPatch,
        extra: tuple[Finding, ...],
        patched: PatchedText = lambda _path: None,
    ) -> GateResult:
        import time

        start = time.monotonic()
        findings: list[Finding] = list(extra)
        findings += check_size(ctx, parsed)
        for change in parsed.files:
            findings += check_paths(ctx, change)
            findings += check_content(change)
        findings += check_lockfiles(ctx, parsed)
        findings += [
            _finding(w.rule, w.message, path=w.path, line=w.line)
            for w in check_tests_weakened(parsed, patched)
        ]
        findings = list(dict.fromkeys(findings))  # git's view and the text's may agree
        blocking = [f for f in findings if f.severity == "error"]
        details = {
            "files": len(parsed.files),
            "changed_lines": parsed.changed_lines,
            "max_diff_lines": _max_lines(ctx),
            "paths": sorted({p.path for c in parsed.files for p in c.paths}),
        }
        return GateResult(
            name=NAME,
            passed=not blocking,
            findings=tuple(findings),
            duration_s=time.monotonic() - start,
            details=details,
        )


def _patched_head(trees: PatchTrees) -> PatchedText:
    """A file's head as the patch leaves it, for the line rules that need more than the
    added lines (a Go file's package clause sits above its license and doc comments)."""

    def read(path: str) -> str | None:
        head = read_head(trees.after, path, _PATCHED_HEAD_BYTES)
        return None if head is None else head.decode("utf-8", errors="replace")

    return read


def discovery_findings(ctx: GateContext, changes: list[DiscoveryChange]) -> list[Finding]:
    """A change to how tests are found or run blocks unless .ribbit.yml says warn."""
    warn = ctx.repo_config.gates.test_config_changes == "warn"
    return [
        _finding(
            "test-config-changed",
            f"the patch changes how tests are found or run ({c.what}); set "
            "gates.test_config_changes: warn in .ribbit.yml to allow it",
            path=c.path,
            severity="warning" if warn else "error",
        )
        for c in changes
    ]


def source_findings(trees: PatchTrees, applied: list[AppliedChange]) -> list[Finding]:
    """worker/gates/source.py's checks on every file git applied (not deleted ones)."""
    added = {
        change.new.path: frozenset(n for n, _ in change.added)
        for change in trees.parsed.files
        if change.new is not None
    }
    files = [
        ChangedFile(
            path=c.path, added_lines=added.get(c.path, frozenset()), is_test=is_test_path(c.path)
        )
        for c in applied
        if c.status != "D"
    ]
    modules = repo_modules(trees.after, is_test_path)
    return [_source_finding(f) for f in check_files(trees.after, files, modules)]


def autorun_findings(trees: PatchTrees, paths: list[str]) -> list[Finding]:
    """Files CI runs by path and npm install hooks (worker/gates/autorun.py)."""
    ci_paths = [p for p in tracked_files(trees.before) if _is_ci_path(p)]
    found: list[AutoRunFinding] = ci_run_scripts(trees.before, ci_paths, paths)
    found += install_hooks(trees.before, trees.after, paths)
    return [_finding(f.rule, f.message, path=f.path, line=f.line) for f in found]


def _source_finding(found: SourceFinding) -> Finding:
    return _finding(
        found.rule, found.message, path=found.path, line=found.line, severity=found.severity
    )


def check_applied(
    ctx: GateContext, parsed: ParsedPatch, applied: list[AppliedChange]
) -> list[Finding]:
    """Judge what git applied, not only what the text seems to say: a path git changes
    that the parsed text does not name means the two read the patch differently (crafted
    headers), so it blocks; and every path and mode git reports gets the path checks."""
    named = {rp.path for change in parsed.files for rp in change.paths}
    found: list[Finding] = []
    for change in applied:
        rp = normalize_repo_path(change.path)
        if change.path not in named:
            found.append(
                _finding(
                    "patch-misread",
                    "git applies a change to this path that the patch text does not show "
                    "(crafted diff headers?)",
                    path=change.path,
                )
            )
        status: ChangeStatus = {"A": "added", "D": "deleted"}.get(change.status, "modified")  # type: ignore[assignment]
        as_change = FileChange(
            old=None if change.status == "A" else rp,
            new=None if change.status == "D" else rp,
            status=status,
            old_mode=None if change.status == "A" else change.old_mode,
            new_mode=None if change.status == "D" else change.new_mode,
        )
        found += check_paths(ctx, as_change)
        found += check_content(as_change)
        if change.status == "D" and is_test_path(change.path):
            found.append(
                _finding("test-file-deleted", "the patch deletes a test file", path=change.path)
            )
    return found


def _max_lines(ctx: GateContext) -> int:
    return ctx.repo_config.gates.max_diff_lines or ctx.gate_settings.max_diff_lines


def check_size(ctx: GateContext, parsed: ParsedPatch) -> list[Finding]:
    limit = _max_lines(ctx)
    if parsed.changed_lines > limit:
        return [
            _finding(
                "diff-too-large",
                f"the patch changes {parsed.changed_lines} lines; the limit is {limit}",
            )
        ]
    return []


@dataclass(frozen=True)
class _PathPolicy:
    """What the repository lets the bot change (.ribbit.yml's paths and rule files)."""

    allow: tuple[str, ...]
    deny: tuple[str, ...]
    extra_rule_files: frozenset[str]


def _roundabout(policy: _PathPolicy, rp: RepoPath) -> str | None:
    if rp.raw == rp.path:
        return None
    return f"`{rp.raw}` is written in a roundabout way (it means `{rp.path}`)"


def _ci_config(policy: _PathPolicy, rp: RepoPath) -> str | None:
    return "the patch changes CI configuration" if _is_ci_path(rp.path) else None


def _gate_config(policy: _PathPolicy, rp: RepoPath) -> str | None:
    lowered = rp.path.casefold()
    if (
        lowered in _GATE_CONFIG
        or lowered.rsplit("/", 1)[-1] == ".semgrepignore"
        or lowered.startswith(".semgrep/")
        # The sandbox's image: a revision job builds what its branch names.
        or lowered.startswith(".devcontainer/")
        or lowered == ".devcontainer.json"
        or rp.path in policy.extra_rule_files
    ):
        return "the patch changes the bot's or the gates' own configuration"
    return None


def _not_allowed(policy: _PathPolicy, rp: RepoPath) -> str | None:
    if any(path_matches(rp.path, g) for g in policy.allow):
        return None
    return f"outside the paths the bot may change ({', '.join(policy.allow)})"


def _denied(policy: _PathPolicy, rp: RepoPath) -> str | None:
    denied = next((g for g in policy.deny if path_matches(rp.path, g)), None)
    return None if denied is None else f"matches a denied path ({denied})"


def _auto_run(policy: _PathPolicy, rp: RepoPath) -> str | None:
    return auto_run_reason(rp.path)


def _package_index(policy: _PathPolicy, rp: RepoPath) -> str | None:
    return package_index_reason(rp.path)


# Each rule judges a path inside the repository (one that escapes it is reported alone):
# (rule, the reason it blocks the path, or None when the path passes), in report order.
_PATH_RULES: tuple[tuple[str, Callable[[_PathPolicy, RepoPath], str | None]], ...] = (
    ("path-not-normalized", _roundabout),
    ("ci-config", _ci_config),
    ("gate-config", _gate_config),
    ("auto-run-file", _auto_run),
    ("package-index", _package_index),
    ("path-not-allowed", _not_allowed),
    ("path-denied", _denied),
)


def check_paths(ctx: GateContext, change: FileChange) -> list[Finding]:
    policy = _PathPolicy(
        allow=tuple(ctx.repo_config.paths.allow),
        deny=tuple(ctx.repo_config.paths.deny),
        extra_rule_files=frozenset(p.strip("/") for p in ctx.repo_config.gates.semgrep_rules),
    )
    found: list[Finding] = []
    for rp in change.paths:
        if rp.escapes:
            found.append(
                _finding(
                    "path-escapes-repo",
                    f"`{rp.raw}` points outside the repository or into .git",
                    path=rp.raw,
                )
            )
            continue
        for rule, reason_of in _PATH_RULES:
            reason = reason_of(policy, rp)
            if reason is not None:
                found.append(_finding(rule, reason, path=rp.path))
    return found


def check_content(change: FileChange) -> list[Finding]:
    found: list[Finding] = []
    if change.binary:
        found.append(_finding("binary-file", "the patch changes a binary file", path=change.path))
    if change.is_symlink:
        found.append(
            _finding("symlink", "the patch adds or changes a symbolic link", path=change.path)
        )
    if change.is_submodule:
        found.append(_finding("submodule", "the patch changes a submodule", path=change.path))
    if (
        change.old_mode != change.new_mode
        and change.new_mode
        and change.old_mode
        and change.new_mode.endswith("755")
    ):
        found.append(
            _finding(
                "made-executable",
                "the patch makes a file executable",
                path=change.path,
                severity="warning",
            )
        )
    for line_no, text in change.added:
        bidi = bidi_in_line(change.path, line_no, text)
        if bidi is not None:
            found.append(_source_finding(bidi))
        index = index_line_reason(change.path, text)
        if index is not None:
            found.append(_finding("package-index", index, path=change.path, line=line_no))
        for kind in find_secrets(text):
            found.append(
                _finding(
                    f"secret-{kind}",
                    f"the patch adds what looks like a secret ({kind})",
                    path=change.path,
                    line=line_no,
                )
            )
    return found


def check_lockfiles(ctx: GateContext, parsed: ParsedPatch) -> list[Finding]:
    if ctx.repo_config.gates.allow_lockfiles:
        return []
    found: list[Finding] = []
    for change in parsed.files:
        for rp in change.paths:
            name = rp.path.rsplit("/", 1)[-1].casefold()
            if name in _LOCK_FILES:
                found.append(
                    _finding(
                        "lockfile",
                        "the patch changes a lock file (set "
                        "gates.allow_lockfiles in .ribbit.yml to allow it)",
                        path=rp.path,
                    )
                )
                break
            if _REQUIREMENTS_RE.search(rp.path) and _requirements_pinned(ctx, change, rp.path):
                found.append(
                    _finding(
                        "lockfile",
                        "the patch changes a hash-pinned requirements file (a lock file)",
                        path=rp.path,
                    )
                )
                break
    return found


def _requirements_pinned(ctx: GateContext, change: FileChange, path: str) -> bool:
    if any(_HASH_RE.search(t) for _, t in (*change.added, *change.removed)):
        return True
    if change.old is None or change.old.escapes:
        return False
    base = read_base_file(ctx, change.old.path)
    return base is not None and bool(_HASH_RE.search(base.decode(errors="replace")))
