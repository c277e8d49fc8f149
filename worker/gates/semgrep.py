"""Semgrep: block the security findings a patch adds, not the ones it inherits.

The changed files are scanned twice, at the base commit and with the patch, with
our ruleset (worker/gates/rules/), the repository's own ``.semgrep.yml`` and any
extra rule files. A finding is identified by rule, file and the code it matched
(whitespace-normalised), never by line number, so code that merely moves does
not count as new, while a second copy of an existing insecure line does.

Semgrep runs on the host: it parses the code and never executes it. It runs
offline (``--metrics=off``, local rule files only, a throwaway HOME so no login
token is read), with inline ``nosemgrep`` comments disabled (a patch must not
silence its own findings) and ``.semgrepignore`` files ignored for the same reason.
Rule files are always passed by absolute path: semgrep reads ``r/...`` and
``p/...`` as registry names.

It runs Semgrep's OCaml command line (``--experimental``, "osemgrep"), not the Python
one: the same engine (semgrep-core) matches either way, but the Python wrapper spends
about 2 s importing itself and re-validating the rule files on every scan, most of a
grade's cost (issue #33). osemgrep walks the folder holding both trees and ``--include``
names the targets, so rules' ``paths:`` filters apply as the Python CLI applied them to
the files it was given (:func:`_scan_argv`). Both give the same matches and parse
warnings (tests/unit/worker/gates/test_semgrep.py); a repository rule naming an unknown
language is a rule error in osemgrep (skipped with a warning) where the Python CLI
failed the scan.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import yaml

from bot.store.records.gate_report import Finding, GateResult, Severity
from worker.gates.base import GateContext
from worker.gates.patch import FileChange
from worker.gates.runner import apply_failure, run_tree_gate
from worker.gates.trees import PatchTrees, regular_file_inside

NAME = "semgrep"
RULES_DIR = Path(__file__).parent / "rules"
REPO_RULE_FILES = (".semgrep.yml", ".semgrep.yaml")
_SEVERITY: dict[str, Severity] = {
    "ERROR": "error",
    "WARNING": "warning",
    "INFO": "info",
    "CRITICAL": "error",
    "HIGH": "error",
    "MEDIUM": "warning",
    "LOW": "info",
}
_CONFIG_ERROR_EXIT = 7
PARTIAL_RULE = "semgrep-partial-scan"
_MAX_TARGET_BYTES = 20 * 1024 * 1024
# Semgrep's OCaml command line (osemgrep): about 0.3 s a scan where the Python one takes
# 2.5 s. "python" is the fallback _scan_argv takes for paths it cannot pass to osemgrep.
ENGINE: Literal["ocaml", "python"] = "ocaml"
_PLAIN_PATH = re.compile(r"[\w.+@,=%~:/-]+")


class SemgrepError(Exception):
    """Semgrep could not scan (not installed, crashed, bad output)."""


@dataclass(frozen=True)
class SemgrepMatch:
    rule: str
    path: str  # relative to the tree
    line: int
    message: str
    severity: Severity
    code: str  # the matched source, whitespace-normalised

    def moved(self, path: str) -> SemgrepMatch:
        return replace(self, path=path)

    @property
    def fingerprint(self) -> tuple[str, str, str]:
        return (self.rule, self.path, self.code)


def isolated_semgrep() -> Path:
    """Where `make install` and the image put Semgrep's own venv (deploy/semgrep.lock):
    beside the app's venv, so neither's pins constrain the other's."""
    return Path(f"{sys.prefix}-semgrep") / "bin" / "semgrep"


@dataclass(frozen=True)
class SemgrepLocation:
    path: str | None  # None: not found
    source: str  # what chose it, for `ribbit doctor`
    problem: str = ""  # why not found


def locate_semgrep(configured: Path | None = None) -> SemgrepLocation:
    """The configured semgrep (gates.semgrep_bin), else the isolated install, else PATH's.
    A configured one that is missing is not found: silently scanning with whatever other
    semgrep lies around would hide the misconfiguration behind other rules' versions."""
    if configured is not None:
        found = shutil.which(str(configured))
        if found is None:
            return SemgrepLocation(
                None,
                "RIBBIT_GATES__SEMGREP_BIN",
                f"RIBBIT_GATES__SEMGREP_BIN={configured} is not an executable",
            )
        return SemgrepLocation(found, "RIBBIT_GATES__SEMGREP_BIN")
    isolated = isolated_semgrep()
    if isolated.is_file() and os.access(isolated, os.X_OK):
        return SemgrepLocation(str(isolated), "isolated install")
    on_path = shutil.which("semgrep")
    if on_path is not None:
        return SemgrepLocation(on_path, "PATH")
    return SemgrepLocation(
        None, "default", f"no isolated install at {isolated} and no semgrep on PATH"
    )


def find_semgrep(configured: Path | None = None) -> str | None:
    return locate_semgrep(configured).path


def semgrep_version(binary: str, timeout: float = 60) -> str:
    """What ``binary --version`` says, run the way the gate runs it (offline, throwaway
    HOME): proof that the install works, not just that a file is there."""
    with tempfile.TemporaryDirectory(prefix="ribbit-semgrep-") as home:
        try:
            proc = subprocess.run(
                [binary, "--version", "--disable-version-check"],
                env=_scan_env(Path(home)),
                capture_output=True,
                timeout=timeout,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SemgrepError(f"{binary} --version: {exc}") from None
    if proc.returncode != 0:
        raise SemgrepError(
            f"{binary} --version exited {proc.returncode}: {_first_error([], proc.stderr)}"
        )
    return proc.stdout.decode(errors="replace").strip()


def builtin_rule_files() -> list[Path]:
    return sorted(p.resolve() for p in RULES_DIR.glob("*.yml"))


def _rule_catalogue(files: list[Path]) -> dict[str, dict[str, Any]]:
    """Rule id -> what SARIF and the report say about it."""
    catalogue: dict[str, dict[str, Any]] = {}
    for path in files:
        try:
            data = yaml.safe_load(path.read_text())
        except (OSError, yaml.YAMLError):
            continue
        for rule in (data or {}).get("rules", []) if isinstance(data, dict) else []:
            if not isinstance(rule, dict) or "id" not in rule:
                continue
            meta = rule.get("metadata") or {}
            catalogue[str(rule["id"])] = {
                "short": str(meta.get("short") or rule["id"]),
                "message": " ".join(str(rule.get("message", "")).split()),
                "family": meta.get("family"),
                "tags": [t for t in (meta.get("family"), meta.get("cwe")) if t],
            }
    return catalogue


def _canonical_rule_id(check_id: str, known: dict[str, dict[str, Any]]) -> str:
    """Semgrep prefixes ids with the rule file's folder path; strip it back off."""
    best = max(
        (rid for rid in known if check_id == rid or check_id.endswith("." + rid)),
        key=len,
        default=None,
    )
    return best or check_id


def _inside(tree: Path, rel: str) -> Path | None:
    return regular_file_inside(tree, rel)


class SemgrepGate:
    name = NAME

    def __init__(self, binary: str | None = None) -> None:
        self._binary = binary

    def run(self, ctx: GateContext) -> GateResult:
        return run_tree_gate(self, ctx)

    def run_unapplied(self, ctx: GateContext, reason: str) -> GateResult:
        return apply_failure(NAME, reason)

    def run_on_trees(self, ctx: GateContext, trees: PatchTrees) -> GateResult:
        start = time.monotonic()
        binary = self._binary or find_semgrep(ctx.gate_settings.semgrep_bin)
        if binary is None:
            return _missing_result()
        warnings: list[Finding] = []
        builtin = builtin_rule_files()
        repo_rules = self._repo_rule_files(ctx, trees.before, warnings)
        deployment = [p.resolve() for p in ctx.gate_settings.extra_semgrep_rules]
        catalogue = _rule_catalogue(builtin + deployment + repo_rules)

        before_targets, after_targets, rename = _targets(trees.parsed.files)
        # One semgrep run for both trees (its start-up is most of its time): targets are
        # named "before/..." and "after/..." from the folder holding both.
        targets = [f"before/{t}" for t in before_targets if _inside(trees.before, t)]
        targets += [f"after/{t}" for t in after_targets if _inside(trees.after, t)]
        scan = _TreeScan(
            binary,
            trees.before.parent,
            targets,
            catalogue,
            ctx.time_left(ctx.gate_settings.semgrep_timeout_s),
        )
        try:
            matches, repo_rules = scan.run(builtin + deployment, repo_rules, warnings)
        except (SemgrepError, _ConfigError, subprocess.TimeoutExpired) as exc:
            failed = Finding(
                gate=NAME, rule="semgrep-failed", message=f"semgrep could not scan: {exc}"
            )
            return GateResult(
                name=NAME,
                passed=False,
                duration_s=time.monotonic() - start,
                findings=(*warnings, failed),
            )
        before, after, partial = _by_tree(matches)
        warnings += partial
        new_matches, fixed = _new_matches(before, after, rename, trees)
        findings = [
            Finding(NAME, m.rule, m.message, path=m.path, line=m.line, severity=m.severity)
            for m in new_matches
        ]
        blocking = [f for f in findings if f.severity != "info"]
        used = {m.rule for m in new_matches}
        details = {
            "new": len(new_matches),
            "preexisting": len(before),
            "fixed": fixed,
            "files_scanned": {"before": len(before_targets), "after": len(after_targets)},
            "rule_files": [str(p) for p in builtin + deployment + repo_rules],
            "rules": {rid: info for rid, info in catalogue.items() if rid in used},
        }
        return GateResult(
            name=NAME,
            passed=not blocking,
            findings=(*findings, *warnings),
            duration_s=time.monotonic() - start,
            details=details,
        )

    @staticmethod
    def _repo_rule_files(ctx: GateContext, before: Path, warnings: list[Finding]) -> list[Path]:
        """The repository's own rules, from the BASE tree: a patch cannot change them."""
        found: list[Path] = []
        for rel in (*REPO_RULE_FILES, *ctx.repo_config.gates.semgrep_rules):
            path = _inside(before, rel.lstrip("/")) if ".." not in rel.split("/") else None
            if path is not None:
                found.append(path)
            elif rel not in REPO_RULE_FILES:
                warnings.append(
                    Finding(
                        gate=NAME,
                        rule="repo-rules-missing",
                        severity="warning",
                        message=f"rule file {rel} named in .ribbit.yml is not "
                        "a file in the repository",
                    )
                )
        return found


def _targets(changes: tuple[FileChange, ...]) -> tuple[list[str], list[str], dict[str, str]]:
    """Files to scan before and after, and old -> new path for renames."""
    before: list[str] = []
    after: list[str] = []
    rename: dict[str, str] = {}
    for c in changes:
        if c.binary or c.is_submodule:
            continue
        if c.new is not None and not c.new.escapes:
            after.append(c.new.path)
        if c.old is not None and not c.old.escapes and c.status in {"modified", "renamed"}:
            before.append(c.old.path)
            if c.new is not None:
                rename[c.old.path] = c.new.path
    return sorted(set(before)), sorted(set(after)), rename


class _ConfigError(Exception):
    pass


def _scan_env(home: Path) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "SEMGREP_SEND_METRICS": "off",
        "SEMGREP_ENABLE_VERSION_CHECK": "0",
        "XDG_CONFIG_HOME": str(home),
        "XDG_CACHE_HOME": str(home),
    }


def _scan_argv(binary: str, targets: list[str], configs: list[Path]) -> list[str]:
    """The scan's command line. osemgrep applies a rule's ``paths:`` filters (the
    credential rules skip tests/) only to files it finds by walking, not to files named
    on its command line, so it walks the folder holding both trees and ``--include``
    picks exactly the targets, anchored at it; the Python CLI is given the files."""
    argv = [binary, "scan", "--json", "--metrics=off", "--disable-version-check"]
    argv += ["--disable-nosem", "--no-git-ignore", "--x-ignore-semgrepignore-files"]
    argv += ["--no-rewrite-rule-ids", f"--max-target-bytes={_MAX_TARGET_BYTES}", "--quiet"]
    argv += [arg for config in configs for arg in ("--config", str(config))]
    # A name --include cannot spell literally (a glob character, a space) goes to the
    # Python CLI, never to a pattern that could match another file or none.
    if ENGINE == "python" or not all(_PLAIN_PATH.fullmatch(t) for t in targets):
        return [*argv, "--", *(f"./{t}" for t in targets)]
    includes = [arg for t in targets for arg in ("--include", f"/{t}")]
    return [*argv[:2], "--experimental", *argv[2:], *includes, "--", "."]


def _scan(
    binary: str,
    tree: Path,
    targets: list[str],
    configs: list[Path],
    catalogue: dict[str, dict[str, Any]],
    home: Path,
    timeout: float,
) -> list[SemgrepMatch]:
    argv = _scan_argv(binary, targets, configs)
    if not targets:
        return []
    proc = subprocess.run(
        argv, cwd=tree, env=_scan_env(home), capture_output=True, timeout=timeout, check=False
    )
    try:
        data = json.loads(proc.stdout or b"{}")
    except json.JSONDecodeError:
        data = {}
    errors = [e for e in data.get("errors", []) if isinstance(e, dict)]
    if proc.returncode == _CONFIG_ERROR_EXIT or any(
        e.get("level") == "error" and "rule" in str(e.get("type", "")).lower() for e in errors
    ):
        raise _ConfigError(_first_error(errors, proc.stderr))
    if proc.returncode not in (0, 1) or "results" not in data:
        raise SemgrepError(f"exit {proc.returncode}: {_first_error(errors, proc.stderr)}")
    matches = []
    for e in errors:  # a file semgrep could not (fully) parse was not (fully) checked
        where = e.get("path") or (e.get("spans") or [{}])[0].get("file")
        if where and e.get("level") in {"warn", "error"}:
            rel = os.path.normpath(str(where))
            matches.append(
                SemgrepMatch(
                    rule=PARTIAL_RULE,
                    path=rel,
                    line=0,
                    severity="warning",
                    code="",
                    message=f"semgrep could not fully parse this file: {_first_error([e], b'')}",
                )
            )
    sources: dict[str, bytes] = {}
    for r in data["results"]:
        rel = os.path.normpath(r["path"])
        if rel not in sources:
            file = _inside(tree, rel)
            sources[rel] = file.read_bytes() if file else b""
        start, end = r["start"].get("offset", 0), r["end"].get("offset", 0)
        code = " ".join(sources[rel][start:end].decode(errors="replace").split())
        extra = r.get("extra", {})
        rule = _canonical_rule_id(r["check_id"], catalogue)
        matches.append(
            SemgrepMatch(
                rule=rule,
                path=rel,
                line=int(r["start"]["line"]),
                message=" ".join(str(extra.get("message", rule)).split()),
                severity=_SEVERITY.get(str(extra.get("severity", "ERROR")).upper(), "error"),
                code=code,
            )
        )
    return matches


def _first_error(errors: list[dict[str, Any]], stderr: bytes) -> str:
    if errors:
        e = errors[0]
        return str(e.get("message") or e.get("long_msg") or e.get("type"))[:500]
    return stderr.decode(errors="replace").strip()[-500:] or "no output"


def _missing_result() -> GateResult:
    return GateResult(
        name=NAME,
        passed=False,
        findings=(
            Finding(
                gate=NAME,
                rule="semgrep-missing",
                # Where it was looked for is the operator's business (`ribbit doctor`
                # says), not the issue's readers'.
                message="semgrep is not installed, so the patch could not be scanned",
            ),
        ),
    )


@dataclass(frozen=True)
class _TreeScan:
    """One semgrep run over both trees' targets, from the folder that holds both."""

    binary: str
    root: Path
    targets: list[str]
    catalogue: dict[str, dict[str, Any]]
    timeout: float

    def run(
        self, trusted: list[Path], repo_rules: list[Path], warnings: list[Finding]
    ) -> tuple[list[SemgrepMatch], list[Path]]:
        """The matches, and the repository rule files used: invalid repository rules are
        skipped with a warning and the scan runs again without them; invalid rules of
        Ribbit's or the deployment's fail the gate."""
        with tempfile.TemporaryDirectory(prefix="ribbit-semgrep-") as home:
            try:
                return self._scan(trusted + repo_rules, Path(home)), repo_rules
            except _ConfigError as exc:
                if not repo_rules:
                    raise SemgrepError(str(exc)) from None
                warnings.append(
                    Finding(
                        gate=NAME,
                        rule="repo-rules-invalid",
                        severity="warning",
                        message=f"the repository's Semgrep rules are invalid and were "
                        f"skipped: {exc}",
                    )
                )
                return self._scan(trusted, Path(home)), []

    def _scan(self, rules: list[Path], home: Path) -> list[SemgrepMatch]:
        return _scan(
            self.binary, self.root, self.targets, rules, self.catalogue, home, self.timeout
        )


def _by_tree(
    matches: list[SemgrepMatch],
) -> tuple[list[SemgrepMatch], list[SemgrepMatch], list[Finding]]:
    """The base tree's matches and the patched tree's, each with its tree's prefix taken
    off the path, and the patched tree's partial-parse notes as warnings (never findings)."""
    before = [
        m.moved(m.path.removeprefix("before/")) for m in matches if m.path.startswith("before/")
    ]
    after = [m.moved(m.path.removeprefix("after/")) for m in matches if m.path.startswith("after/")]
    partial = [
        Finding(gate=NAME, rule=m.rule, message=m.message, path=m.path, severity="warning")
        for m in after
        if m.rule == PARTIAL_RULE
    ]
    return (
        [m for m in before if m.rule != PARTIAL_RULE],
        [m for m in after if m.rule != PARTIAL_RULE],
        partial,
    )


def _new_matches(
    before: list[SemgrepMatch],
    after: list[SemgrepMatch],
    rename: dict[str, str],
    trees: PatchTrees,
) -> tuple[list[SemgrepMatch], int]:
    """The after-tree matches the base did not have (by rule, path through renames and
    code), and how many base matches the patch removed."""
    before_prints = Counter((m.rule, rename.get(m.path, m.path), m.code) for m in before)
    after_prints = Counter(m.fingerprint for m in after)
    new_prints = after_prints - before_prints
    fixed = sum((before_prints - after_prints).values())
    new_matches: list[SemgrepMatch] = []
    # Identical copies are interchangeable; report the ones on lines the patch adds.
    added = {(c.new.path, n) for c in trees.parsed.files if c.new for n, _ in c.added}
    for m in sorted(after, key=lambda m: (m.path, m.line) not in added):
        if new_prints[m.fingerprint] > 0:
            new_prints[m.fingerprint] -= 1
            new_matches.append(m)
    new_matches.sort(key=lambda m: (m.path, m.line))
    return new_matches, fixed
