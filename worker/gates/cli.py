"""``ribbit gates``: run the gates on a patch file against a repository's HEAD.

Exit status: 0 when the patch is verified (a test fails without it and passes with it,
and no gate blocked it), 1 when a gate refused it, 3 when nothing blocked it but no test
shows the fix (unverified: with ``--no-tests`` always), 2 on usage errors (click's own,
or settings, repository or sandbox problems) and when the base commit's set-up fails:
then no gate runs, and the output is the failure reason a solve job would store
(worker/sandbox/failure.py), never a verdict on the patch.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, NoReturn

import click

from bot.cli_options import checkout_option
from bot.console import echo_json, line, progress, styled
from bot.hostgit import GitError, revision_commit
from bot.store.records.gate_report import GateReport, Verdict
from worker.gates.base import Gate, GateContext
from worker.gates.verdict import TestVerdict
from worker.sandbox.backend_option import backend_option
from worker.sandbox.base import Sandbox, SandboxFactory

if TYPE_CHECKING:
    from bot.store.failure import FailureReason
    from worker.repo_config import RepoConfig
    from worker.sandbox.recipe import SandboxRecipe
    from worker.sandbox.setup import SetupResult
    from worker.settings import WorkerSettings

USAGE_ERROR = 2
# The exit status of each verdict: a script's `&&` goes on only for a verified patch.
EXIT_STATUS = {Verdict.VERIFIED: 0, Verdict.REFUSED: 1, Verdict.UNVERIFIED: 3}


def _no_sandbox(checkout: Path) -> Sandbox:
    raise click.UsageError("the test gate needs a sandbox but --no-tests was given")


def _sandboxes(backend: str | None, image: str | None) -> SandboxRecipe:
    """The solve job's sandboxes and setup step, imported only when tests are to run."""
    from bot.settings import SettingsError
    from worker.sandbox.recipe import SandboxRecipe
    from worker.settings import SandboxSettings, load_worker_settings

    try:
        base = load_worker_settings().sandbox
    except SettingsError as exc:
        raise click.UsageError(str(exc)) from None
    settings = SandboxSettings.model_validate(
        {**base.model_dump(), "backend": backend or base.backend}
    )
    return SandboxRecipe.production(settings, image=image)


class _Loaded(NamedTuple):
    """The repository's ``.ribbit.yml`` (its setup detected when it names none) and the
    worker's settings."""

    config: RepoConfig
    settings: WorkerSettings
    detected: bool  # the setup command is Ribbit's guess, not .ribbit.yml's


def _load(repo: Path, base: str) -> _Loaded:
    from bot.settings import SettingsError
    from worker.repo_config import RepoConfigError, read_repo_config
    from worker.sandbox.setupcmd import commit_files, with_detected_setup
    from worker.settings import load_worker_settings

    try:
        repo_config = read_repo_config(repo, base)
        settings = load_worker_settings()
    except (RepoConfigError, SettingsError) as exc:
        raise click.UsageError(str(exc)) from None
    named = "setup" in repo_config.model_fields_set
    repo_config = with_detected_setup(
        repo_config, commit_files(repo, base), enabled=settings.sandbox.detect_setup
    )
    return _Loaded(repo_config, settings, detected=not named)


def _test_sandboxes(
    backend: str | None, loaded: _Loaded, repo: Path, base: str, patch: str, *, as_json: bool
) -> tuple[SandboxFactory, Callable[[Sandbox], SetupResult]]:
    """The test gate's sandboxes (no network) and setup step (the base's snapshot; for
    a patch that changes dependency manifests, the patched tree's registry-only install:
    worker/gates/basesetup.py), after setting the base commit up; both live as long as
    the command. A base that cannot be set up ends the command with its reason."""
    from worker.gates.basesetup import BaseSetup, base_checkout
    from worker.sandbox.base import SandboxError

    repo_config = loaded.config
    recipe = _sandboxes(backend, repo_config.image)
    ctx = click.get_current_context()
    tmp = Path(ctx.with_resource(tempfile.TemporaryDirectory(prefix="ribbit-gates-base-")))
    try:
        checkout = base_checkout(repo, base, tmp / "base")
        env = ctx.with_resource(
            BaseSetup(
                recipe,
                repo_config.setup,
                checkout,
                patch=patch,
                install_scripts=repo_config.patch_install_scripts,
            )
        )
        result = env.set_up()
    except SandboxError as exc:
        raise click.UsageError(f"could not set the base commit up: {exc}") from None
    if not result.ok:
        _setup_failed(result, loaded, as_json=as_json)
    return env.sandboxes, env.step


def _setup_failed(result: SetupResult, loaded: _Loaded, *, as_json: bool) -> NoReturn:
    """The base's set-up failed: nothing of the patch ran, so the reason, as a solve
    job stores it (the refused requests, who can fix it), instead of a verdict."""
    from worker.sandbox.failure import setup_failure

    failure = setup_failure(
        result,
        detected=loaded.detected,
        permitted_hosts=loaded.settings.sandbox.repo_setup_hosts,
        stopped="so no test ran",
    )
    if as_json:
        echo_json({"verdict": None, "failure": failure.to_json()})
    else:
        click.echo(failure.to_text())
        line("gates: ", styled("not run", "failed"), " (the base commit's set-up failed)")
    click.get_current_context().exit(USAGE_ERROR)


def _repo_head(repo: Path) -> str:
    try:
        return revision_commit(repo, "HEAD")
    except GitError:
        raise click.UsageError(f"{repo} is not a git repository with a commit") from None


@click.command("gates")
@checkout_option("The repository to judge the patch against, at its HEAD")
@click.option(
    "--patch",
    "patch_file",
    required=True,
    type=click.Path(exists=True, dir_okay=False, allow_dash=True, path_type=Path),
    help="Unified git diff to judge ('-' reads stdin).",
)
@click.option("--no-tests", is_flag=True, help="Skip the test gate (no sandbox needed).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object.")
@click.option(
    "--sarif",
    "sarif_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write all findings as SARIF 2.1.0 to this file.",
)
@backend_option
@click.option(
    "--issue", "issue_text", default="", help="Issue title and body, to find the tests it names."
)
@click.option(
    "--issue-label",
    "issue_labels",
    multiple=True,
    help="A label of the issue (repeatable), as .ribbit.yml gates.behaviour_change_labels reads.",
)
def gates_command(
    checkout: Path,
    patch_file: Path,
    no_tests: bool,
    as_json: bool,
    sarif_file: Path | None,
    backend: str | None,
    issue_text: str,
    issue_labels: tuple[str, ...],
) -> None:
    """Run the gates (tests, Semgrep, hygiene) on PATCH against the repository's HEAD."""
    from worker.gates.hygiene import HygieneGate
    from worker.gates.semgrep import SemgrepGate
    from worker.gates.tests import TestGate

    if str(patch_file) == "-":
        patch = sys.stdin.read()
    else:
        patch = patch_file.read_text(encoding="utf-8", errors="surrogateescape")
    base = _repo_head(checkout)
    loaded = _load(checkout, base)
    repo_config = loaded.config
    chosen: Sequence[Gate] = [SemgrepGate(), HygieneGate()]
    factory: SandboxFactory = _no_sandbox
    setup_step = None
    if not no_tests:
        # As in a solve job: the base set up once (registry proxy), every test run, the
        # patched tree's included, from its snapshot with no network.
        factory, setup_step = _test_sandboxes(
            backend, loaded, checkout, base, patch, as_json=as_json
        )
        chosen = [TestGate(), *chosen]
    ctx = GateContext(
        repo_dir=checkout.resolve(),
        base_commit=base,
        patch=patch,
        repo_config=repo_config,
        gate_settings=loaded.settings.gates,
        sandbox_factory=factory,
        issue_text=issue_text,
        issue_labels=issue_labels,
        setup_step=setup_step,
    )
    report = _run_with_progress(ctx, chosen)
    if sarif_file is not None:
        sarif_file.write_text(json.dumps(report.to_sarif(), indent=2))
    if as_json:
        click.echo(_json_view(report))
    else:
        _print_human(report)
    click.get_current_context().exit(EXIT_STATUS.get(report.verdict, 1))


def _run_with_progress(ctx: GateContext, chosen: Sequence[Gate]) -> GateReport:
    """The gates' report, showing which gate runs (one step per gate)."""
    from worker.gates import run_gates

    with progress("preparing the trees", total=len(chosen)) as steps:
        started: list[str] = []

        def on_gate(name: str) -> None:
            if started:
                steps.advance()
            started.append(name)
            steps.doing(f"gate {len(started)}/{len(chosen)}: {name}")

        return run_gates(ctx, chosen, on_gate=on_gate)


LOG_TAIL_LINES = 60


def _print_human(report: GateReport) -> None:
    """The report as the issue shows it, then the log tail of each gate that did not pass
    (what explains a failure; all of it is in --json)."""
    click.echo(report.to_markdown())
    tests = report.result("tests")
    if tests is not None:  # what the PR body says under the table, said here too
        click.echo(f"\n{TestVerdict.from_result(tests).notes_markdown()}\n")
    for result in report.results:
        if result.passed or not result.logs.strip():
            continue
        lines = result.logs.rstrip().splitlines()
        cut = len(lines) - LOG_TAIL_LINES
        title = (
            f"--- {result.name} log"
            + (f" (last {LOG_TAIL_LINES} of {len(lines)} lines)" if cut > 0 else "")
            + " ---"
        )
        line(styled(title, "failed"))
        click.echo("\n".join(lines[max(cut, 0) :]))
    base_failure = _base_setup_failure(report)
    if base_failure is not None:
        click.echo(base_failure.to_text())
    word = report.verdict.word
    style = "passed" if report.passed else "held" if not report.refused else "failed"
    line("gates: ", styled(word, style), f" ({report.summary_line()})")


def _base_setup_failure(report: GateReport) -> FailureReason | None:
    """When the base's tests never ran or its run was not its own (the test gate's
    ``base-no-report``, ``base-report-mismatch``), the repository's set-up is at fault:
    who can fix it, read from the base run's output as a solve job reads its refused
    run's (worker/sandbox/failure.py), so both paths name the same person and setting.
    The log tail above already shows the output itself."""
    from bot.store.failure import FailureReason
    from worker.sandbox.failure import output_fixer

    tests = next((r for r in report.results if r.name == "tests" and not r.passed), None)
    rules = {f.rule for f in tests.findings} if tests is not None else set()
    if tests is None or not rules & {"base-no-report", "base-report-mismatch"}:
        return None
    base_run = tests.logs.split("--- after ---\n", 1)[0]
    what = (
        "The base commit's tests never ran, so the gates judged no test"
        if "base-no-report" in rules
        else "The base commit's own test run is not its own (its report and its run disagree)"
    )
    return FailureReason.of(
        f"{what}: this is about the repository's set-up, not the patch.",
        fixer=output_fixer(base_run),
    )


def _json_view(report: GateReport) -> str:
    return report.to_json(indent=2)
