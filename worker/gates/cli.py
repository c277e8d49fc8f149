"""``ribbit gates``: run the gates on a patch file against a repository's HEAD.

Exit status: 0 when the patch is verified (a test fails without it and passes with it,
and no gate blocked it), 1 when a gate refused it, 3 when nothing blocked it but no test
shows the fix (unverified: with ``--no-tests`` always), 2 on usage errors (click's own,
or settings, repository or sandbox problems).
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

from bot.console import line, progress, styled
from bot.hostgit import run_git
from bot.store.gate_report import GateReport, Verdict
from worker.gates.base import Gate, GateContext
from worker.sandbox.base import Sandbox, SandboxFactory

if TYPE_CHECKING:
    from worker.repo_config import RepoConfig
    from worker.sandbox.recipe import SandboxRecipe
    from worker.sandbox.setup import SetupResult

USAGE_ERROR = 2
# The exit status of each verdict: a script's `&&` goes on only for a verified patch.
EXIT_STATUS = {Verdict.VERIFIED: 0, Verdict.REFUSED: 1, Verdict.UNVERIFIED: 3}


def _no_sandbox(checkout: Path) -> Sandbox:
    raise click.UsageError("the test gate needs a sandbox but --no-tests was given")


def _sandboxes(backend: str, image: str | None) -> SandboxRecipe:
    """The solve job's sandboxes and setup step, imported only when tests are to run."""
    from bot.settings import SettingsError
    from worker.sandbox.recipe import SandboxRecipe
    from worker.settings import SandboxSettings, load_worker_settings

    try:
        base = load_worker_settings().sandbox
    except SettingsError as exc:
        raise click.UsageError(str(exc)) from None
    chosen = "auto" if backend == "local" else backend
    settings = SandboxSettings.model_validate({**base.model_dump(), "backend": chosen})
    return SandboxRecipe.production(settings, image=image)


def _test_sandboxes(
    backend: str, repo_config: RepoConfig, repo: Path, base: str, patch: str
) -> tuple[SandboxFactory, Callable[[Sandbox], SetupResult]]:
    """The test gate's sandboxes (no network) and setup step (the base's snapshot; for
    a patch that changes dependency manifests, the patched tree's registry-only install:
    worker/gates/basesetup.py), after setting the base commit up; both live as long as
    the command."""
    from worker.gates.basesetup import BaseSetup, base_checkout
    from worker.sandbox.base import SandboxError

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
        env.set_up()
    except SandboxError as exc:
        raise click.UsageError(f"could not set the base commit up: {exc}") from None
    return env.sandboxes, env.step


def _repo_head(repo: Path) -> str:
    proc = run_git(repo, "rev-parse", "--verify", "HEAD^{commit}")
    if proc.returncode != 0:
        raise click.UsageError(f"{repo} is not a git repository with a commit")
    return proc.stdout.decode().strip()


@click.command("gates")
@click.option(
    "--repo",
    "repo",
    required=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Repository checkout; the patch is judged against its HEAD.",
)
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
@click.option(
    "--backend",
    type=click.Choice(["local", "docker", "bubblewrap"]),
    default="local",
    show_default=True,
    help="Sandbox for the tests; local: whichever this machine has (auto).",
)
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
    repo: Path,
    patch_file: Path,
    no_tests: bool,
    as_json: bool,
    sarif_file: Path | None,
    backend: str,
    issue_text: str,
    issue_labels: tuple[str, ...],
) -> None:
    """Run the gates (tests, Semgrep, hygiene) on PATCH against the repository's HEAD."""
    from bot.settings import SettingsError
    from worker.gates.hygiene import HygieneGate
    from worker.gates.semgrep import SemgrepGate
    from worker.gates.tests import TestGate
    from worker.repo_config import RepoConfigError, read_repo_config
    from worker.sandbox.setupcmd import commit_files, with_detected_setup
    from worker.settings import load_worker_settings

    if str(patch_file) == "-":
        patch = sys.stdin.read()
    else:
        patch = patch_file.read_text(encoding="utf-8", errors="surrogateescape")
    base = _repo_head(repo)
    try:
        repo_config = read_repo_config(repo, base)
        settings = load_worker_settings()
    except (RepoConfigError, SettingsError) as exc:
        raise click.UsageError(str(exc)) from None
    gate_settings = settings.gates
    repo_config = with_detected_setup(
        repo_config, commit_files(repo, base), enabled=settings.sandbox.detect_setup
    )
    chosen: Sequence[Gate] = [SemgrepGate(), HygieneGate()]
    factory: SandboxFactory = _no_sandbox
    setup_step = None
    if not no_tests:
        # As in a solve job: the base set up once (registry proxy), every test run, the
        # patched tree's included, from its snapshot with no network.
        factory, setup_step = _test_sandboxes(backend, repo_config, repo, base, patch)
        chosen = [TestGate(), *chosen]
    ctx = GateContext(
        repo_dir=repo.resolve(),
        base_commit=base,
        patch=patch,
        repo_config=repo_config,
        gate_settings=gate_settings,
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
    word = report.verdict.word
    style = "passed" if report.passed else "held" if not report.refused else "failed"
    line("gates: ", styled(word, style), f" ({report.summary_line()})")


def _json_view(report: GateReport) -> str:
    return report.to_json(indent=2)
